package policy

import (
	"testing"
	"unsafe"
)

// TestEngineSize: an Engine fits in 456 bytes (448, a size class of Go's
// allocator, until retry.maxResetWaitMs added a setting of 8 bytes to
// Config), since each session waiting out a backoff keeps one
// (docs/performance.md, Sessions at scale). It keeps no step of its own:
// the actions are handed one from a pool.
func TestEngineSize(t *testing.T) {
	if got := unsafe.Sizeof(Engine{}); got > 456 {
		t.Fatalf("an Engine takes %d bytes, more than 456", got)
	}
}
