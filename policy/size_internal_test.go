package policy

import (
	"testing"
	"unsafe"
)

// TestEngineSize: an Engine fits in 416 bytes (a size class of Go's
// allocator), since each session waiting out a backoff keeps one
// (docs/performance.md, Sessions at scale). It keeps no step of its own
// (the actions are handed one from a pool), and what an input works in
// (its effects, entries and raised steps) only while the driver has not
// released it: one pointer to a scratch from a pool. The start of the
// retry chain and the backoff's deadline are kept as Unix nanoseconds and
// the context's two counts as int32; the position of the context's last
// message is kept out of the position map, so that removing a failed
// answer leaves the map alone.
func TestEngineSize(t *testing.T) {
	if got := unsafe.Sizeof(Engine{}); got > 416 {
		t.Fatalf("an Engine takes %d bytes, more than 416", got)
	}
}
