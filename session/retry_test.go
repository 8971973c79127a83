package session_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/states"
)

func TestErrorThenSuccess(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{fail(service503), ok("done")})
		start := time.Now()
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Equal(t, 2*time.Second, time.Since(start), "one wait of 2000 ms, in fake time")
		assert.Equal(t, []string{
			"agent_start",
			`message error "503 Service Unavailable"`,
			"agent_end",
			"idle>classifying agent_end",
			`retry_start 1/3 2000ms "503 Service Unavailable"`,
			"classifying>backoff retry",
			"backoff>continuing elapsed",
			"agent_start",
			"message stop",
			"retry_end ok 1",
			"agent_end",
			"continuing>classifying agent_end",
			"classifying>idle accept",
		}, rec.lines())
		assert.Equal(t, 2*time.Second, rec.timeOf("backoff>continuing"))
		assert.Equal(t, states.Idle, s.Status().State)
		assert.Equal(t, 0, s.Status().Attempt)
		assert.False(t, s.Status().Retrying)
	})
}

// TestAbortRetryDuringEachWait cancels the chain in each of its three
// waits.
func TestAbortRetryDuringEachWait(t *testing.T) {
	for wait := 1; wait <= 3; wait++ {
		t.Run("wait "+string(rune('0'+wait)), func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				calls := []scripted.Call{fail(service503), fail(service503), fail(service503), ok("done")}
				s, _, rec := newSession(t, calls)
				done := promptAsync(s, "hi")
				// Wait into the middle of wait number `wait`: 1 s, 2+2 s, 2+4+4 s.
				elapsed := []time.Duration{time.Second, 4 * time.Second, 10 * time.Second}[wait-1]
				time.Sleep(elapsed)
				synctest.Wait()
				require.Equal(t, states.Backoff, s.Status().State)
				require.Equal(t, wait, s.Status().Attempt)
				start := time.Now()
				s.AbortRetry()
				err := <-done
				assert.Zero(t, time.Since(start), "the cancel is prompt: no time passes")
				require.ErrorIs(t, err, policy.ErrRetryCancelled)
				rc := rec.recovery()
				assert.Len(t, rc, wait+1)
				assert.Equal(t, `retry_end fail `+string(rune('0'+wait))+` "Retry cancelled"`, rc[len(rc)-1])
				lines := rec.lines()
				assert.Equal(t, []string{`retry_end fail ` + string(rune('0'+wait)) + ` "Retry cancelled"`, "backoff>cancelled cancel_retry", "cancelled>idle reset"}, lines[len(lines)-3:])
				assert.Equal(t, states.Idle, s.Status().State)
				assert.Equal(t, 0, s.Status().Attempt)
				// A later timer from the cancelled wait changes nothing.
				time.Sleep(time.Minute)
				assert.Equal(t, lines, rec.lines())
			})
		})
	}
}
