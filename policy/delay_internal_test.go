package policy

import (
	"math"
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/transcript"
	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"
)

func TestRetryDelay(t *testing.T) {
	cfg := ReferenceConfig().Retry
	for n, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 10: 1024 * time.Second} {
		assert.Equal(t, want, retryDelay(cfg, n, 0, 0, false), "attempt %d", n)
	}
	// Saturates instead of overflowing, for any attempt.
	for _, n := range []int{50, 62, 63, 64, 1000, math.MaxInt32} {
		d := retryDelay(cfg, n, 0, 0, false)
		assert.Equal(t, maxDelay, d, "attempt %d", n)
	}
	cfg.BaseDelayMs = math.MaxInt64
	assert.Equal(t, maxDelay, retryDelay(cfg, 1, 0, 0, false))
	cfg.BaseDelayMs = 0
	assert.Zero(t, retryDelay(cfg, 40, 0, 0, false))

	cfg = ReferenceConfig().Retry
	cfg.MaxDelayMs = 5000
	assert.Equal(t, 5*time.Second, retryDelay(cfg, 100, 0, 0, false))
	cfg.Jitter = 1
	assert.Equal(t, time.Duration(0), retryDelay(cfg, 100, 0.99999999999, 0, false)/time.Millisecond*0)
	assert.InDelta(t, float64(5*time.Second), float64(retryDelay(cfg, 100, 0, 0, false)), 0)
	assert.Equal(t, 2500*time.Millisecond, retryDelay(cfg, 100, 0.5, 0, false))

	cfg = ReferenceConfig().Retry
	cfg.HonorRetryAfter = true
	assert.Equal(t, 9*time.Second, retryDelay(cfg, 1, 0, 9*time.Second, true))
	assert.Equal(t, 2*time.Second, retryDelay(cfg, 1, 0, time.Second, true))
	assert.False(t, hintOverCap(cfg, time.Hour, true), "no cap, no end")
	cfg.MaxDelayMs = 10_000
	assert.True(t, hintOverCap(cfg, 11*time.Second, true))
	assert.False(t, hintOverCap(cfg, 10*time.Second, true))
	assert.False(t, hintOverCap(cfg, time.Hour, false))

	// The defaults for real use: the exponential delays under a 60 s cap,
	// a server's hint honoured up to it, and one above it ends the chain.
	cfg = DefaultConfig().Retry
	for n, want := range map[int]time.Duration{1: 2 * time.Second, 3: 8 * time.Second, 5: 32 * time.Second, 6: time.Minute, 1000: time.Minute} {
		assert.Equal(t, want, retryDelay(cfg, n, 0, 0, false), "attempt %d", n)
	}
	assert.Equal(t, 10*time.Second, retryDelay(cfg, 1, 0, 10*time.Second, true), "retry-after: 10 waits 10 s")
	assert.Equal(t, 2*time.Second, retryDelay(cfg, 1, 0, time.Second, true), "a shorter hint does not shorten the backoff")
	assert.False(t, hintOverCap(cfg, time.Minute, true))
	assert.True(t, hintOverCap(cfg, time.Minute+time.Millisecond, true))
}

func TestCutPoint(t *testing.T) {
	user := func(chars int) transcript.Message {
		return transcript.Message{Role: transcript.RoleUser, Content: transcript.TextContent(string(make([]byte, chars)))}
	}
	asst := func(chars int) transcript.Message {
		return transcript.Message{Role: transcript.RoleAssistant, Content: transcript.TextContent(string(make([]byte, chars)))}
	}
	tool := func(chars int) transcript.Message {
		return transcript.Message{Role: transcript.RoleToolResult, Content: transcript.TextContent(string(make([]byte, chars)))}
	}
	image := transcript.Message{Role: transcript.RoleUser, Content: []transcript.Block{{Type: transcript.BlockImage}}}
	cases := []struct {
		name string
		msgs []transcript.Message
		keep int
		at   int
		ok   bool
	}{
		{"everything fits", []transcript.Message{user(40), asst(40)}, 100, 0, false},
		{"cut at the message that reaches the budget", []transcript.Message{user(400), asst(400), user(400), asst(400)}, 200, 2, true},
		{"exactly the budget", []transcript.Message{user(400), asst(400), user(400)}, 100, 2, true},
		{"a tool result is never the first kept", []transcript.Message{user(400), asst(40), tool(400), asst(40)}, 110, 3, true},
		{"a tool call and its result stay together: cut at the call", []transcript.Message{user(400), asst(400), tool(40), user(40)}, 50, 1, true},
		{"only tool results after the budget: nothing", []transcript.Message{user(400), asst(40), tool(400)}, 100, 0, false},
		{"an image without data counts 1,600 tokens", []transcript.Message{user(40), image, asst(40)}, 1200, 1, true},
		{"cutting at the start: nothing", []transcript.Message{user(4000), asst(40)}, 1000, 0, false},
		{"only an old summary before the cut: nothing", []transcript.Message{{Role: transcript.RoleSummary, Content: transcript.TextContent("s")}, user(4000), asst(40)}, 1000, 0, false},
		{"ceil(chars/4)", []transcript.Message{user(10), user(1), user(1)}, 2, 1, true},
		{"empty", nil, 10, 0, false},
	}
	for _, c := range cases {
		at, ok := cutPoint(c.msgs, c.keep, 0)
		assert.Equal(t, c.ok, ok, c.name)
		if c.ok {
			assert.Equal(t, c.at, at, c.name)
		}
	}
}

// issue item 13: delays saturate at maxDelay, never wrap, and are whole
// milliseconds, so the delayMs the session reports is the wait it schedules.
func TestRetryDelaySaturates(t *testing.T) {
	const maxMs = int64(maxDelay / time.Millisecond)
	retry := func(base, maxDelay int64, jitter float64, honor bool) RetryConfig {
		return RetryConfig{Enabled: true, MaxRetries: 3, BaseDelayMs: base, MaxDelayMs: maxDelay, Jitter: jitter, HonorRetryAfter: honor}
	}
	cases := []struct {
		name    string
		cfg     RetryConfig
		attempt int
		r       float64
		hint    time.Duration
		want    time.Duration
	}{
		{"a base at the int64 limit", retry(math.MaxInt64, 0, 0, false), 1, 0, 0, maxDelay},
		{"a base at the int64 limit, jitter 0.5, draw 0", retry(math.MaxInt64, 0, 0.5, false), 1, 0, 0, maxDelay},
		{"a base at the int64 limit, jitter 0.5, draw 0.5", retry(math.MaxInt64, 0, 0.5, false), 1, 0.5, 0, time.Duration(maxMs*3/4) * time.Millisecond},
		{"a base near the int64 limit, jitter 0.5", retry(math.MaxInt64-1, 0, 0.5, false), 3, 0, 0, maxDelay},
		{"attempt 64, tiny jitter", retry(2000, 0, 1e-17, false), 64, 0.5, 0, maxDelay},
		{"attempt 1000, tiny jitter", retry(1, 0, 1e-17, false), 1000, 0.999, 0, maxDelay},
		{"attempt MaxInt, no jitter", retry(2000, 0, 0, false), math.MaxInt, 0, 0, maxDelay},
		{"10^13 ms", retry(10_000_000_000_000, 0, 0, false), 1, 0, 0, maxDelay},
		{"maxDelay exactly", retry(maxMs, 0, 0, false), 1, 0, 0, maxDelay},
		{"one below maxDelay", retry(maxMs-1, 0, 0, false), 1, 0, 0, maxDelay - time.Millisecond},
		{"one below maxDelay, doubled", retry(maxMs-1, 0, 0, false), 2, 0, 0, maxDelay},
		{"a cap above maxDelay", retry(math.MaxInt64, math.MaxInt64, 0, false), 5, 0, 0, maxDelay},
		{"a cap below maxDelay", retry(math.MaxInt64, 1000, 0.5, false), 70, 0.5, 0, 750 * time.Millisecond},
		{"full jitter, draw near 1", retry(math.MaxInt64, 0, 1, false), 1, 0.9999999999999999, 0, 0},
		{"a draw out of range counts as its nearest end", retry(1000, 0, 0.5, false), 1, 7, 0, 500 * time.Millisecond},
		{"a negative draw", retry(1000, 0, 0.5, false), 1, -3, 0, time.Second},
		{"a NaN draw", retry(1000, 0, 0.5, false), 1, math.NaN(), 0, time.Second},
		{"a hint at the int64 limit", retry(2000, 0, 0, true), 1, 0, math.MaxInt64, maxDelay},
		{"a hint is rounded up to a whole millisecond", retry(2000, 0, 0, true), 1, 0, 2500*time.Millisecond + 1, 2501 * time.Millisecond},
		{"a hint below the delay", retry(2000, 0, 0, true), 1, 0, 1500*time.Millisecond + 1, 2 * time.Second},
	}
	for _, c := range cases {
		got := retryDelay(c.cfg, c.attempt, c.r, c.hint, c.hint > 0)
		assert.Equal(t, c.want, got, c.name)
		assert.Equal(t, got, time.Duration(got.Milliseconds())*time.Millisecond, "%s: a whole number of ms", c.name)
	}
	assert.Equal(t, int64(9_223_372_036_854), maxDelay.Milliseconds(), "the documented value")
}

// issue item 13: for any settings and attempt, 0 <= delay <= maxDelay, the
// delay is a whole number of milliseconds (what auto_retry_start reports is
// what is scheduled), and without jitter it never shrinks as attempts grow.
func TestRetryDelayProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := RetryConfig{
			BaseDelayMs:     rapid.OneOf(rapid.Int64Range(0, 10_000), rapid.Int64Min(0)).Draw(t, "base"),
			MaxDelayMs:      rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, 100_000), rapid.Int64Min(0)).Draw(t, "maxDelay"),
			Jitter:          rapid.OneOf(rapid.Just(0.0), rapid.Float64Range(0, 1)).Draw(t, "jitter"),
			HonorRetryAfter: rapid.Bool().Draw(t, "honor"),
		}
		n := rapid.OneOf(rapid.IntRange(1, 80), rapid.IntMin(1)).Draw(t, "attempt")
		r := rapid.Float64Range(0, 1).Draw(t, "r")
		hint := time.Duration(rapid.Int64Min(0).Draw(t, "hint"))
		hasHint := rapid.Bool().Draw(t, "hasHint")
		d := retryDelay(cfg, n, r, hint, hasHint)
		if d < 0 || d > maxDelay {
			t.Fatalf("delay %v outside [0, maxDelay]", d)
		}
		if d != time.Duration(d.Milliseconds())*time.Millisecond {
			t.Fatalf("delay %v is not a whole number of ms: %d ms would be reported", d, d.Milliseconds())
		}
		if cfg.Jitter == 0 {
			if next := retryDelay(cfg, n+1, r, hint, hasHint); n < math.MaxInt && next < d {
				t.Fatalf("attempt %d waits %v, attempt %d only %v", n, d, n+1, next)
			}
		}
	})
}

// Issue 24 §1: with no count limit a chain's attempt grows without bound;
// its delay keeps doubling up to the cap and never wraps, whatever the
// attempt: attempt 10,000 (and the largest int) waits the cap, or
// maxDelay without one, and the patient preset's schedule is 2, 4, 8, 16,
// 32 s and then 60 s.
func TestRetryDelayUnboundedAttempts(t *testing.T) {
	patient := PatientConfig().Retry
	var got []time.Duration
	for n := 1; n <= 8; n++ {
		got = append(got, retryDelay(patient, n, 0, 0, false))
	}
	assert.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second,
		time.Minute, time.Minute, time.Minute}, got)
	for _, n := range []int{10_000, math.MaxInt32, math.MaxInt} {
		assert.Equal(t, time.Minute, retryDelay(patient, n, 0, 0, false), n)
		half := patient
		half.Jitter = 0.5
		assert.Equal(t, 30*time.Second, retryDelay(half, n, 1, 0, false), "jitter 0.5 of the capped delay: %d", n)
		uncapped := patient
		uncapped.MaxDelayMs, uncapped.Jitter = 0, 0
		assert.Equal(t, maxDelay, retryDelay(uncapped, n, 0, 0, false), n)
	}
}
