package openai_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/internal/providertest"
	"github.com/agentfsm/agentfsm/policy"
)

// Issue 24: each header and body field an OpenAI-compatible API sends to
// say when to retry reaches the classifier through the adapter's failed
// message, and so sets the wait, without a retry-after. The text says
// "try again in 7s" each time: the headers come first.
func TestRetryHintsSetTheWait(t *testing.T) {
	gemini := providertest.Reply{
		Status: http.StatusTooManyRequests,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte(`[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED",` +
			`"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"9s"}]}}]`),
	}
	for _, tc := range []struct {
		name  string
		reply func() providertest.Reply
		want  time.Duration
	}{
		{"the requests' reset, the requests exhausted", func() providertest.Reply {
			r := providertest.OpenAIRateLimit(7 * time.Second)
			r.Header.Del("Retry-After")
			r.Header.Set("X-Ratelimit-Reset-Requests", "12s")
			r.Header.Set("X-Ratelimit-Reset-Tokens", "40s")
			return r
		}, 12 * time.Second},
		{"the tokens' reset, the tokens exhausted", func() providertest.Reply {
			r := providertest.OpenAIRateLimit(7 * time.Second)
			r.Header.Del("Retry-After")
			r.Header.Set("X-Ratelimit-Remaining-Requests", "5")
			r.Header.Set("X-Ratelimit-Remaining-Tokens", "0")
			r.Header.Set("X-Ratelimit-Reset-Tokens", "20.5s")
			return r
		}, 20500 * time.Millisecond},
		{"retry-after-ms", func() providertest.Reply {
			r := providertest.OpenAIRateLimit(7 * time.Second)
			r.Header.Del("Retry-After")
			r.Header.Set("Retry-After-Ms", "4500")
			return r
		}, 4500 * time.Millisecond},
		{"the text alone", func() providertest.Reply {
			r := providertest.OpenAIRateLimit(7 * time.Second)
			for name := range r.Header {
				if name != "Content-Type" {
					r.Header.Del(name)
				}
			}
			return r
		}, 7 * time.Second},
		{"a Gemini body in an array, with a RetryInfo", func() providertest.Reply { return gemini }, 9 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := policy.DefaultConfig()
				cfg.Retry.HonorRetryAfter = true
				h := newHarness(t, cfg, nil)
				h.fake.Push(tc.reply(), completion("ok"))
				start := time.Now()
				require.NoError(t, h.s.Prompt(context.Background(), "hi"))
				assert.Equal(t, tc.want, time.Since(start))
				r := h.retries()
				require.Len(t, r, 1)
				assert.Equal(t, tc.want.Milliseconds(), r[0].DelayMs)
			})
		})
	}
}
