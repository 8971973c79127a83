package policy

import (
	"testing"
	"unsafe"
)

// TestEngineSize: an Engine fits in 480 bytes (a size class of Go's
// allocator), since each session waiting out a backoff keeps one
// (docs/performance.md, Sessions at scale). It keeps no step of its own:
// the actions are handed one from a pool. (It was 448 before a retry
// chain had a time budget: the setting and the chain's start take 32.)
func TestEngineSize(t *testing.T) {
	if got := unsafe.Sizeof(Engine{}); got > 480 {
		t.Fatalf("an Engine takes %d bytes, more than 480", got)
	}
}
