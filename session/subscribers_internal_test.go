package session

import "testing"

// goid tells goroutines apart and is stable within one (issue item 14).
func TestGoid(t *testing.T) {
	mine := goid()
	if mine == 0 || goid() != mine {
		t.Fatalf("goid() = %d, then %d", mine, goid())
	}
	other := make(chan uint64)
	go func() { other <- goid() }()
	if id := <-other; id == 0 || id == mine {
		t.Fatalf("another goroutine's goid() = %d, this one's %d", id, mine)
	}
}
