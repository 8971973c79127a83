package session

import (
	"testing"
	"testing/synctest"
	"unsafe"

	"github.com/agentfsm/agentfsm/events"
)

// TestSubscriberSize: a subscriber fits in 144 bytes (a size class of Go's
// allocator), since each session waiting out a backoff keeps its
// subscribers (docs/performance.md, Sessions at scale): it keeps the
// session value its calls are made through, not the logger, the redaction
// and a context of its own.
func TestSubscriberSize(t *testing.T) {
	if got := unsafe.Sizeof(subscriber{}); got > 144 {
		t.Fatalf("a subscriber takes %d bytes, more than 144", got)
	}
}

// TestDrainedSubscriberKeepsLittle: once its queue is drained, a subscriber
// keeps room for spareKept events, not the array of the largest batch it
// delivered; and the next event it is handed is delivered from that room.
func TestDrainedSubscriberKeepsLittle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ss subscribers
		var got []events.Event
		sub := ss.add(&subscriber{fn: func(ev events.Event) { got = append(got, ev) }}, nil)
		for range 100 {
			ss.emit(events.MessageUpdate{})
		}
		ss.wake()
		synctest.Wait()
		check := func(delivered int) {
			t.Helper()
			sub.mu.Lock()
			defer sub.mu.Unlock()
			if len(got) != delivered {
				t.Fatalf("delivered %d events, want %d", len(got), delivered)
			}
			if sub.running || sub.queue != nil || cap(sub.spare) > spareKept {
				t.Fatalf("drained: running %v, queue %d of %d, spare of %d; want a nil queue and room for %d at most",
					sub.running, len(sub.queue), cap(sub.queue), cap(sub.spare), spareKept)
			}
		}
		check(100)
		ss.emit(events.AgentEnd{})
		ss.wake()
		synctest.Wait()
		check(101)
		if _, ok := got[100].(events.AgentEnd); !ok {
			t.Fatalf("last event %T, want events.AgentEnd", got[100])
		}
		ss.close(nil)
	})
}

// TestDeliveryStartAllocatesNothing: handing a waiting subscriber an event
// and starting its delivery goroutine allocates nothing once the first
// delivery has run (the session's decision at a run's end does it for
// each run; docs/performance.md): the go statement calls the function
// value the subscriber keeps, not a closure made each time.
func TestDeliveryStartAllocatesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ss subscribers
		n := 0
		ss.add(&subscriber{fn: func(events.Event) { n++ }}, nil)
		var ev events.Event = events.MessageUpdate{} // boxed once
		deliver := func() {
			ss.emit(ev)
			ss.wake()
			synctest.Wait() // the delivery goroutine has run and stopped
		}
		deliver()
		if allocs := testing.AllocsPerRun(100, deliver); allocs != 0 {
			t.Fatalf("a delivery allocates %v times", allocs)
		}
		if n != 102 {
			t.Fatalf("%d events delivered, want 102", n)
		}
	})
}

// TestLoopHandsOnBeforeItsLastDelivery: the loop delivers what its last
// closure emitted itself, to a subscriber whose delivery is idle, instead
// of starting a goroutine and ending; it hands the loop on first, so a
// subscriber blocked on that event holds up only itself: a closure posted
// meanwhile runs, on a new loop.
func TestLoopHandsOnBeforeItsLastDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(idleAgent{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		release := make(chan struct{})
		got := make(chan events.Event, 2)
		s.Subscribe(func(ev events.Event) {
			got <- ev
			if _, first := ev.(events.MessageUpdate); first {
				<-release
			}
		})
		s.post(func() { s.subs.emit(events.MessageUpdate{}) })
		if ev, ok := (<-got).(events.MessageUpdate); !ok {
			t.Fatalf("first delivery %T", ev)
		}
		// The subscriber blocks in the delivery of the loop's last
		// closure; the loop must run the next one.
		ran := make(chan struct{})
		s.post(func() { s.subs.emit(events.AgentEnd{}); close(ran) })
		<-ran
		close(release)
		if ev := <-got; ev == nil {
			t.Fatal("no second delivery")
		} else if _, ok := ev.(events.AgentEnd); !ok {
			t.Fatalf("second delivery %T", ev)
		}
	})
}
