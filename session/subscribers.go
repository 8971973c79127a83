package session

import (
	"fmt"
	"log/slog"
	"sync"
)

// SubscribeOption configures one subscription.
type SubscribeOption func(*subscriber)

// WithBuffer bounds the subscriber's queue to n events. When it is full,
// newer events are dropped and the subscriber receives EventsDropped with
// the count once it catches up. Without it the queue grows as needed and a
// slow subscriber loses nothing.
func WithBuffer(n int) SubscribeOption {
	return func(s *subscriber) {
		if n > 0 {
			s.limit = n
		}
	}
}

// subscriber delivers events to one function, in order, one at a time. A
// delivery goroutine runs only while events are queued, so a subscriber
// costs no goroutine while its session waits; a slow or stuck function
// holds up only its own deliveries.
type subscriber struct {
	fn     func(Event)
	limit  int
	logger *slog.Logger

	mu      sync.Mutex
	queue   []Event
	spare   []Event // the last batch's slice, reused by the next queue
	dropped int
	stopped bool          // unsubscribed: deliver nothing more
	closing bool          // session closed: deliver what is queued, then stop
	running bool          // a delivery goroutine is at work
	idle    chan struct{} // closed when the delivery goroutine stops, if someone waits
}

// subscribers is the session's list of subscribers.
type subscribers struct {
	mu      sync.Mutex
	list    []*subscriber
	pending bool // events queued since the last wake
}

func (ss *subscribers) add(fn func(Event), logger *slog.Logger, opts []SubscribeOption) *subscriber {
	sub := &subscriber{fn: fn, logger: logger}
	for _, o := range opts {
		o(sub)
	}
	ss.mu.Lock()
	ss.list = append(ss.list, sub)
	ss.mu.Unlock()
	return sub
}

func (ss *subscribers) remove(sub *subscriber) {
	ss.mu.Lock()
	for i, s := range ss.list {
		if s == sub {
			ss.list = append(ss.list[:i:i], ss.list[i+1:]...)
			break
		}
	}
	ss.mu.Unlock()
	sub.mu.Lock()
	sub.stopped = true
	for _, ev := range sub.queue {
		if b, ok := ev.(barrier); ok {
			close(b.done) // a flush waits for nothing more here
		}
	}
	sub.queue = nil
	sub.mu.Unlock()
}

// emit queues ev for every subscriber. It never blocks and starts no
// delivery: wake does, once for everything emitted since the last call.
func (ss *subscribers) emit(ev Event) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, sub := range ss.list {
		sub.push(ev)
	}
	ss.pending = true
}

// wake starts the delivery of what was emitted.
func (ss *subscribers) wake() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !ss.pending {
		return
	}
	ss.pending = false
	for _, sub := range ss.list {
		sub.start()
	}
}

// barrier is queued by flush: delivery closes done when it reaches it,
// without calling the subscriber.
type barrier struct{ done chan struct{} }

func (barrier) Type() string { return "" }

// flush returns when every subscriber has received every event emitted
// before the call.
func (ss *subscribers) flush() {
	ss.mu.Lock()
	var waits []chan struct{}
	for _, sub := range ss.list {
		b := barrier{done: make(chan struct{})}
		sub.mu.Lock()
		if !sub.stopped && !sub.closing {
			sub.queue = append(sub.queue, b) // never dropped, whatever the limit
			waits = append(waits, b.done)
		}
		sub.mu.Unlock()
		sub.start()
	}
	ss.mu.Unlock()
	for _, w := range waits {
		<-w
	}
}

// close lets every subscriber deliver what is queued, and waits until they
// have.
func (ss *subscribers) close() {
	ss.mu.Lock()
	list := ss.list
	ss.list = nil
	ss.mu.Unlock()
	for _, sub := range list {
		sub.mu.Lock()
		sub.closing = true
		sub.mu.Unlock()
		sub.start()
	}
	for _, sub := range list {
		sub.waitIdle()
	}
}

func (s *subscriber) push(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.closing {
		return
	}
	if s.limit > 0 && len(s.queue) >= s.limit {
		s.dropped++
		return
	}
	s.queue = append(s.queue, ev)
}

// start runs a delivery goroutine when events are queued and none runs.
func (s *subscriber) start() {
	s.mu.Lock()
	if s.running || s.stopped || (len(s.queue) == 0 && s.dropped == 0) {
		s.mu.Unlock()
		return
	}
	s.running = true
	s.mu.Unlock()
	go s.deliver()
}

// waitIdle returns once no delivery goroutine runs.
func (s *subscriber) waitIdle() {
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	<-idle
}

// deliver hands queued events to the function until the queue is empty.
func (s *subscriber) deliver() {
	for {
		s.mu.Lock()
		if s.stopped || (len(s.queue) == 0 && s.dropped == 0) {
			s.running = false
			if s.idle != nil {
				close(s.idle)
				s.idle = nil
			}
			s.mu.Unlock()
			return
		}
		batch := s.queue
		s.queue = s.spare[:0]
		s.spare = nil
		dropped := s.dropped
		s.dropped = 0
		s.mu.Unlock()
		s.deliverBatch(batch, dropped)
		clear(batch) // let the events go
		s.mu.Lock()
		if s.spare == nil {
			s.spare = batch[:0]
		}
		s.mu.Unlock()
	}
}

func (s *subscriber) deliverBatch(batch []Event, dropped int) {
	for i, ev := range batch {
		if b, ok := ev.(barrier); ok {
			close(b.done)
			continue
		}
		if !s.call(ev) {
			// Unsubscribed meanwhile: release any flush waiting here.
			for _, rest := range batch[i+1:] {
				if b, ok := rest.(barrier); ok {
					close(b.done)
				}
			}
			return
		}
	}
	if dropped > 0 {
		s.call(EventsDropped{Count: dropped})
	}
}

// call runs the subscriber's function on ev, recovering a panic so that it
// neither stops the session nor this subscriber's later events. It reports
// false when the subscriber was removed meanwhile.
func (s *subscriber) call(ev Event) (alive bool) {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return false
	}
	defer func() {
		if r := recover(); r != nil {
			s.logger.Error("session: a subscriber panicked", "event", ev.Type(), "panic", fmt.Sprint(r))
			alive = true
		}
	}()
	s.fn(ev)
	return true
}
