package policy

import (
	"testing"
	"unsafe"
)

// TestEngineSize: an Engine fits in 480 bytes (a size class of Go's
// allocator), since each session waiting out a backoff keeps one
// (docs/performance.md, Sessions at scale). It keeps no step of its own:
// the actions are handed one from a pool. The retry chain's time budget
// and the wait for a reset added three settings and the chain's start:
// the start and the backoff's deadline are kept as Unix nanoseconds and
// the context's two counts as int32 to stay within 448 bytes; the position
// of the context's last message, kept out of the position map so that
// removing a failed answer leaves the map alone, took it to 456.
func TestEngineSize(t *testing.T) {
	if got := unsafe.Sizeof(Engine{}); got > 480 {
		t.Fatalf("an Engine takes %d bytes, more than 480", got)
	}
}
