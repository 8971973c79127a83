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
