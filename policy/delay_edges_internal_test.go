package policy

import (
	"math"
	"testing"
	"time"
)

// A server's hint above MaxDelayMs ends the chain, even when MaxDelayMs is
// the largest a delay may be and the hint is less than a millisecond over
// it: the cap is compared in full, not rounded to the largest Duration.
func TestHintOverTheLargestCap(t *testing.T) {
	cfg := RetryConfig{HonorRetryAfter: true, MaxDelayMs: maxDelayMs}
	for hint, over := range map[time.Duration]bool{
		maxDelay:                   false,
		maxDelay + time.Nanosecond: true,
		math.MaxInt64:              true,
	} {
		if got := hintOverCap(cfg, hint, true); got != over {
			t.Errorf("hint %d ns over a cap of %d ms: %v, want %v", hint, cfg.MaxDelayMs, got, over)
		}
	}
}

// A zero base delay is zero at every attempt, the largest too, at once:
// there is nothing to double, so the doubling stops before it starts
// (an unbounded chain's attempt grows without bound).
func TestZeroBaseDelayAtAnyAttempt(t *testing.T) {
	for _, cfg := range []RetryConfig{{}, {MaxDelayMs: 60_000}, {Jitter: 0.5}, {BaseDelayMs: -5}} {
		for _, n := range []int{1, 2, 64, math.MaxInt32, math.MaxInt} {
			if got := retryDelay(cfg, n, 0.5, 0, false); got != 0 {
				t.Errorf("%+v, attempt %d: %v, want 0", cfg, n, got)
			}
		}
	}
}
