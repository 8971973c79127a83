package session_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// issue item 13: a delay that would overflow waits the longest delay
// instead of none, and auto_retry_start reports exactly that wait.
func TestHugeDelaySaturatesInsteadOfRetryingAtOnce(t *testing.T) {
	for _, c := range []struct {
		name   string
		base   int64
		jitter float64
	}{
		{"a base at the int64 limit with jitter", math.MaxInt64, 0.5},
		{"a base of 10^13 ms", 10_000_000_000_000, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				cfg := policy.ReferenceConfig() // no cap on a delay
				cfg.Retry.BaseDelayMs = c.base
				cfg.Retry.Jitter = c.jitter
				s, agent, rec := newSession(t, []scripted.Call{fail(service503), ok("done")},
					session.WithConfig(cfg), session.WithRandom(func() float64 { return 0 }))
				began := time.Now()
				done := promptAsync(s, "hi")
				time.Sleep(1000 * 24 * time.Hour)
				assert.Equal(t, 1, agent.Remaining(), "the retry has not run")
				// the longest delay (9,223,372,036,854 ms) from then would end in 2292: the wait
				// ends at the last instant the engine keeps, in 2262.
				last := time.UnixMilli(9_223_372_036_854) // the last instant the engine keeps
				require.Equal(t, []string{
					fmt.Sprintf(`retry_start 1/3 %dms "`, last.Sub(began).Milliseconds()) + service503 + `"`,
				}, rec.recovery())
				s.AbortRetry()
				assert.ErrorIs(t, <-done, policy.ErrRetryCancelled)
			})
		})
	}
}
