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

// subscriber delivers events to one function, in order, one at a time, on
// a goroutine of its own, so a slow or stuck function holds up only itself.
type subscriber struct {
	fn     func(Event)
	limit  int
	logger *slog.Logger

	mu      sync.Mutex
	queue   []Event
	spare   []Event // the last batch's slice, reused by the next queue
	dropped int
	stopped bool // unsubscribed: deliver nothing more
	closing bool // session closed: deliver what is queued, then exit
	wake    chan struct{}
	exited  chan struct{}
}

// subscribers is the session's list of subscribers.
type subscribers struct {
	mu      sync.Mutex
	list    []*subscriber
	pending bool // events queued since the last wake
}

func (ss *subscribers) add(fn func(Event), logger *slog.Logger, opts []SubscribeOption) *subscriber {
	sub := &subscriber{fn: fn, logger: logger, wake: make(chan struct{}, 1), exited: make(chan struct{})}
	for _, o := range opts {
		o(sub)
	}
	ss.mu.Lock()
	ss.list = append(ss.list, sub)
	ss.mu.Unlock()
	go sub.deliver()
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
	sub.signal()
}

// emit queues ev for every subscriber. It never blocks and wakes no one:
// wake does, once for everything emitted since the last call.
func (ss *subscribers) emit(ev Event) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, sub := range ss.list {
		sub.push(ev)
	}
	ss.pending = true
}

// wake tells every subscriber that events are queued.
func (ss *subscribers) wake() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !ss.pending {
		return
	}
	ss.pending = false
	for _, sub := range ss.list {
		sub.signal()
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
		sub.signal()
	}
	for _, sub := range list {
		<-sub.exited
	}
}

// barrier is queued by flush: the delivery goroutine closes done when it
// reaches it, without calling the subscriber.
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
		sub.signal()
	}
	ss.mu.Unlock()
	for _, w := range waits {
		<-w
	}
}

func (s *subscriber) push(ev Event) {
	s.mu.Lock()
	if s.stopped || s.closing {
		s.mu.Unlock()
		return
	}
	if s.limit > 0 && len(s.queue) >= s.limit {
		s.dropped++
	} else {
		s.queue = append(s.queue, ev)
	}
	s.mu.Unlock()
}

func (s *subscriber) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) deliver() {
	defer close(s.exited)
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue = s.spare[:0]
		s.spare = nil
		dropped := s.dropped
		s.dropped = 0
		stopped, closing := s.stopped, s.closing
		s.mu.Unlock()
		if stopped {
			for _, ev := range batch {
				if b, ok := ev.(barrier); ok {
					close(b.done)
				}
			}
			return
		}
		for _, ev := range batch {
			if b, ok := ev.(barrier); ok {
				close(b.done)
				continue
			}
			if !s.call(ev) {
				return
			}
		}
		if dropped > 0 && !s.call(EventsDropped{Count: dropped}) {
			return
		}
		clear(batch) // let the events go
		s.mu.Lock()
		if s.spare == nil {
			s.spare = batch[:0]
		}
		s.mu.Unlock()
		if len(batch) == 0 && dropped == 0 {
			if closing {
				return
			}
			<-s.wake
		}
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
