package policy

import (
	"math"
	"time"
)

// maxDelay is the longest wait the session schedules before a retry:
// 9,223,372,036,854 ms (about 292 years), the largest whole number of
// milliseconds a time.Duration holds. A longer delay (a huge BaseDelayMs,
// many doublings, a server's hint) waits maxDelay instead: delays saturate,
// they never wrap. Every delay is a whole number of milliseconds no larger
// than maxDelay, so it converts to milliseconds and back (and to a float64,
// or a JavaScript number) without loss, and the delayMs that
// auto_retry_start reports is exactly the wait scheduled. No wait ends
// after 2262-04-11T23:47:16.854Z, the last instant the engine keeps (as
// Unix nanoseconds): a delay that would end later is shortened to end then.
const maxDelay = time.Duration(math.MaxInt64/int64(time.Millisecond)) * time.Millisecond

// maxDelayMs is maxDelay in milliseconds.
const maxDelayMs = int64(maxDelay / time.Millisecond)

// retryDelay is the wait before retry attempt n (1-based) under cfg:
// BaseDelayMs×2^(n−1); then the cap (MaxDelayMs), the jitter (a factor in
// [1−Jitter, 1], from r in [0, 1]; r outside that counts as its nearest
// end, NaN as 0) and, with HonorRetryAfter, at least the server's hint,
// rounded up to a whole millisecond. Each step saturates at maxDelay.
func retryDelay(cfg RetryConfig, n int, r float64, hint time.Duration, hasHint bool) time.Duration {
	ms := min(max(cfg.BaseDelayMs, 0), maxDelayMs)
	for i := 1; i < n && ms > 0 && ms < maxDelayMs; i++ {
		ms = min(ms*2, maxDelayMs) // no overflow: ms < maxDelayMs < MaxInt64/2
	}
	if cfg.MaxDelayMs > 0 {
		ms = min(ms, cfg.MaxDelayMs)
	}
	if cfg.Jitter > 0 {
		ms = jitter(ms, cfg.Jitter, r)
	}
	d := time.Duration(ms) * time.Millisecond
	if cfg.HonorRetryAfter && hasHint && hint > d {
		d = ceilMs(hint)
	}
	return d
}

// jitter multiplies ms by 1−j×r, within [0, ms]. ms is at most maxDelayMs,
// below 2^53, so float64 holds it exactly and the product converts back to
// int64 without overflow.
func jitter(ms int64, j, r float64) int64 {
	if !(r >= 0) { // NaN too
		r = 0
	}
	f := float64(ms) * (1 - j*min(r, 1))
	switch {
	case !(f > 0):
		return 0
	case f >= float64(ms):
		return ms
	}
	return int64(f)
}

// ceilMs rounds d up to a whole millisecond, at most maxDelay.
func ceilMs(d time.Duration) time.Duration {
	if d >= maxDelay {
		return maxDelay
	}
	if rest := d % time.Millisecond; rest > 0 {
		d += time.Millisecond - rest
	}
	return d
}

// hintOverCap reports whether the server's hint, honoured, exceeds the cap:
// then the chain ends instead of sleeping.
func hintOverCap(cfg RetryConfig, hint time.Duration, hasHint bool) bool {
	return cfg.HonorRetryAfter && hasHint && cfg.MaxDelayMs > 0 && hint > msToDuration(cfg.MaxDelayMs)
}

// msToDuration converts milliseconds to a Duration, saturating at the
// largest Duration (which is above maxDelay: it compares, it is never
// waited).
func msToDuration(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}
