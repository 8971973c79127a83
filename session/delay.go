package session

import (
	"math"
	"time"
)

// retryDelay is the wait before retry attempt n (1-based) under cfg:
// BaseDelayMs×2^(n−1), saturating instead of overflowing; then the cap
// (MaxDelayMs), the jitter (a factor in [1−Jitter, 1], from r in [0, 1)),
// and, with HonorRetryAfter, at least the server's hint.
func retryDelay(cfg RetryConfig, n int, r float64, hint time.Duration, hasHint bool) time.Duration {
	ms := cfg.BaseDelayMs
	for i := 1; i < n && ms > 0; i++ {
		if ms > math.MaxInt64/2 {
			ms = math.MaxInt64
			break
		}
		ms *= 2
	}
	if cfg.MaxDelayMs > 0 && ms > cfg.MaxDelayMs {
		ms = cfg.MaxDelayMs
	}
	if cfg.Jitter > 0 {
		ms = int64(float64(ms) * (1 - cfg.Jitter*r))
	}
	d := msToDuration(ms)
	if cfg.HonorRetryAfter && hasHint && hint > d {
		d = hint
	}
	return d
}

// hintOverCap reports whether the server's hint, honoured, exceeds the cap:
// then the chain ends instead of sleeping.
func hintOverCap(cfg RetryConfig, hint time.Duration, hasHint bool) bool {
	return cfg.HonorRetryAfter && hasHint && cfg.MaxDelayMs > 0 && hint > msToDuration(cfg.MaxDelayMs)
}

// msToDuration converts milliseconds to a Duration, saturating.
func msToDuration(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}
