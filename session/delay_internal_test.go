package session

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRetryDelay(t *testing.T) {
	cfg := DefaultConfig().Retry
	for n, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 10: 1024 * time.Second} {
		assert.Equal(t, want, retryDelay(cfg, n, 0, 0, false), "attempt %d", n)
	}
	// Saturates instead of overflowing, for any attempt.
	for _, n := range []int{50, 62, 63, 64, 1000, math.MaxInt32} {
		d := retryDelay(cfg, n, 0, 0, false)
		assert.Equal(t, time.Duration(math.MaxInt64), d, "attempt %d", n)
	}
	cfg.BaseDelayMs = math.MaxInt64
	assert.Equal(t, time.Duration(math.MaxInt64), retryDelay(cfg, 1, 0, 0, false))
	cfg.BaseDelayMs = 0
	assert.Zero(t, retryDelay(cfg, 40, 0, 0, false))

	cfg = DefaultConfig().Retry
	cfg.MaxDelayMs = 5000
	assert.Equal(t, 5*time.Second, retryDelay(cfg, 100, 0, 0, false))
	cfg.Jitter = 1
	assert.Equal(t, time.Duration(0), retryDelay(cfg, 100, 0.99999999999, 0, false)/time.Millisecond*0)
	assert.InDelta(t, float64(5*time.Second), float64(retryDelay(cfg, 100, 0, 0, false)), 0)
	assert.Equal(t, 2500*time.Millisecond, retryDelay(cfg, 100, 0.5, 0, false))

	cfg = DefaultConfig().Retry
	cfg.HonorRetryAfter = true
	assert.Equal(t, 9*time.Second, retryDelay(cfg, 1, 0, 9*time.Second, true))
	assert.Equal(t, 2*time.Second, retryDelay(cfg, 1, 0, time.Second, true))
	assert.False(t, hintOverCap(cfg, time.Hour, true), "no cap, no end")
	cfg.MaxDelayMs = 10_000
	assert.True(t, hintOverCap(cfg, 11*time.Second, true))
	assert.False(t, hintOverCap(cfg, 10*time.Second, true))
	assert.False(t, hintOverCap(cfg, time.Hour, false))
}

func TestCutPoint(t *testing.T) {
	user := func(chars int) Message { return Message{Role: RoleUser, Text: string(make([]byte, chars))} }
	asst := func(chars int) Message { return Message{Role: RoleAssistant, Text: string(make([]byte, chars))} }
	tool := func(chars int) Message { return Message{Role: RoleToolResult, Text: string(make([]byte, chars))} }
	image := Message{Role: RoleUser, Images: 1}
	cases := []struct {
		name string
		msgs []Message
		keep int
		at   int
		ok   bool
	}{
		{"everything fits", []Message{user(40), asst(40)}, 100, 0, false},
		{"cut at the message that reaches the budget", []Message{user(400), asst(400), user(400), asst(400)}, 200, 2, true},
		{"exactly the budget", []Message{user(400), asst(400), user(400)}, 100, 2, true},
		{"a tool result is never the first kept", []Message{user(400), asst(40), tool(400), asst(40)}, 110, 3, true},
		{"a tool call and its result stay together: cut at the call", []Message{user(400), asst(400), tool(40), user(40)}, 50, 1, true},
		{"only tool results after the budget: nothing", []Message{user(400), asst(40), tool(400)}, 100, 0, false},
		{"an image counts 4800 characters", []Message{user(40), image, asst(40)}, 1200, 1, true},
		{"cutting at the start: nothing", []Message{user(4000), asst(40)}, 1000, 0, false},
		{"only an old summary before the cut: nothing", []Message{{Role: RoleSummary, Text: "s"}, user(4000), asst(40)}, 1000, 0, false},
		{"ceil(chars/4)", []Message{user(10), user(1), user(1)}, 2, 1, true},
		{"empty", nil, 10, 0, false},
	}
	for _, c := range cases {
		at, ok := cutPoint(c.msgs, c.keep)
		assert.Equal(t, c.ok, ok, c.name)
		if c.ok {
			assert.Equal(t, c.at, at, c.name)
		}
	}
}
