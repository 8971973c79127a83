package anthropic_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/providertest"
)

// Issue 24: each header the API sends to say when to retry reaches the
// classifier through the adapter's failed message, and so sets the wait,
// without a retry-after.
func TestRetryHeadersSetTheWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(h http.Header, now time.Time)
		want time.Duration
	}{
		{"the reset of the exhausted limit, though another resets later", func(h http.Header, now time.Time) {
			h.Del("Retry-After")
			h.Set("Anthropic-Ratelimit-Tokens-Reset", now.Add(55*time.Second).UTC().Format(time.RFC3339))
		}, 45 * time.Second},
		{"the output tokens exhausted", func(h http.Header, now time.Time) {
			h.Del("Retry-After")
			h.Set("Anthropic-Ratelimit-Requests-Remaining", "10")
			h.Set("Anthropic-Ratelimit-Output-Tokens-Remaining", "0")
			h.Set("Anthropic-Ratelimit-Output-Tokens-Reset", now.Add(50*time.Second).UTC().Format(time.RFC3339))
		}, 50 * time.Second},
		{"retry-after-ms", func(h http.Header, _ time.Time) {
			h.Del("Retry-After")
			h.Set("Retry-After-Ms", "1500")
		}, 1500 * time.Millisecond},
		{"retry-after as an HTTP date", func(h http.Header, now time.Time) {
			h.Set("Retry-After", now.Add(30*time.Second).UTC().Format(http.TimeFormat))
		}, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := providertest.NewAnthropic(t)
				limited := providertest.AnthropicRateLimit(45*time.Second, time.Now())
				tc.edit(limited.Header, time.Now())
				srv.Push(limited, text("done"))
				cfg := fastConfig()
				cfg.Retry.HonorRetryAfter = true
				s := newSession(t, newAgent(srv), cfg)
				ev := watch(s)
				start := time.Now()
				require.NoError(t, s.Prompt(t.Context(), "hi"))
				assert.Equal(t, tc.want, time.Since(start))
				var waits []int64
				for _, e := range ev.all() {
					if r, ok := e.(events.AutoRetryStart); ok {
						waits = append(waits, r.DelayMs)
					}
				}
				assert.Equal(t, []int64{tc.want.Milliseconds()}, waits)
			})
		})
	}
}
