package session

import (
	"context"
	"sync"

	"github.com/agentfsm/agentfsm/events"
)

// SubscribeOption configures one subscription: WithBuffer gives one. The
// zero SubscribeOption changes nothing.
type SubscribeOption struct {
	limit int // the queue's bound, 0 for none
}

// WithBuffer bounds the subscriber's queue to n events. When it is full,
// newer events are dropped and the subscriber receives events.EventsDropped with
// the count once it catches up. Without it, or with n ≤ 0, the queue grows
// as needed and a slow subscriber loses nothing.
func WithBuffer(n int) SubscribeOption {
	return SubscribeOption{limit: max(n, 0)}
}

// subscriber delivers events to one function, in order, one at a time. A
// delivery goroutine runs only while events are queued, so a subscriber
// costs no goroutine while its session waits; a slow or stuck function
// holds up only its own deliveries.
type subscriber struct {
	fn    func(events.Event)
	limit int
	// view is the session value whose calls are this subscriber's: the
	// lines logged about this subscriber carry it in their context, and
	// its core gives the logger and the redaction of noted secrets.
	view *Session

	mu sync.Mutex
	// queue holds the events to deliver and, for each flush waiting on
	// this subscriber, a nil where the flush's barrier stands; barriers
	// are those flushes' channels, oldest first (see flush).
	queue    []events.Event
	barriers []chan struct{}
	// spare is the last batch's slice, reused by the next queue. When the
	// delivery goroutine stops, the queue is nil and spare holds room for
	// at most spareKept events, so that a waiting subscriber holds little.
	spare   []events.Event
	dropped int
	stopped bool // unsubscribed: deliver nothing more
	closing bool // session closed: deliver what is queued, then stop
	running bool // a delivery goroutine is at work
	// inClose is guarded by subscribers.mu, as waiting is (below): it
	// sits beside the flags above, in the same word.
	inClose bool
	idle    chan struct{} // closed when the delivery goroutine stops, if someone waits
	// deliverFn is deliver as a function value, made at the first start
	// and kept: a go statement that calls a method value the subscriber
	// holds allocates nothing, where "go s.deliver()" allocates its
	// closure each time.
	deliverFn func()

	// Guarded by subscribers.mu: how many Flush calls are in progress
	// (waiting), and whether Close was called (inClose, above), on the
	// value SubscribeSession handed this subscriber. A count, not a flag:
	// the value may flush from the function and from a goroutine it
	// waits for at once, and the first to return must not clear the
	// second.
	waiting int
}

// subscribers is the session's list of subscribers.
type subscribers struct {
	mu      sync.Mutex
	list    []*subscriber
	pending bool // events queued since the last wake
	closed  bool
}

func (ss *subscribers) add(sub *subscriber, opts []SubscribeOption) *subscriber {
	for _, o := range opts {
		if o.limit > 0 {
			sub.limit = o.limit
		}
	}
	ss.mu.Lock()
	sub.closing = ss.closed // a session closed receives no event
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
	sub.stop()
}

// stop ends the deliveries: nothing more is delivered, no call starts
// after it returns, and a flush waits for nothing more here.
func (s *subscriber) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for _, b := range s.barriers {
		close(b)
	}
	s.barriers = nil
	s.queue = nil
}

// emit queues ev for every subscriber. It never blocks and starts no
// delivery: wake does, once for everything emitted since the last call.
func (ss *subscribers) emit(ev events.Event) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, sub := range ss.list {
		sub.push(ev)
	}
	ss.pending = true
}

// wake starts the delivery of what was emitted.
func (ss *subscribers) wake() { ss.wakeAll(false) }

// wakeLast is wake for a goroutine that has nothing left to do once it
// returns (the loop's, at the end of its queue): rather than start a
// delivery goroutine and end, it delivers to one of the subscribers
// itself, and starts goroutines for the others. Each subscriber still has
// at most one delivery at work, and a slow one holds up only its own: the
// caller has already handed its other work on.
func (ss *subscribers) wakeLast() {
	if sub := ss.wakeAll(true); sub != nil {
		sub.deliver()
	}
}

// wakeAll starts the delivery of what was emitted; with keep, it starts
// none for the first subscriber that has something to deliver, and
// returns it, claimed (its delivery is the caller's to run).
func (ss *subscribers) wakeAll(keep bool) (kept *subscriber) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !ss.pending {
		return nil
	}
	ss.pending = false
	for _, sub := range ss.list {
		if keep && kept == nil {
			if sub.claim() {
				kept = sub
			}
			continue
		}
		sub.start()
	}
	return kept
}

// barrier queues a flush's barrier: a nil in the queue, and done, which
// delivery closes when it reaches the nil, without calling the subscriber;
// stopping the subscriber closes it too. It reports false when the
// subscriber delivers nothing more, and then queues nothing.
func (s *subscriber) barrier(done chan struct{}) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.closing {
		return false
	}
	s.room()
	s.queue = append(s.queue, nil) // never dropped, whatever the limit
	s.barriers = append(s.barriers, done)
	return true
}

// passBarrier releases the oldest barrier, which delivery has reached.
func (s *subscriber) passBarrier() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.barriers) == 0 {
		return // released when the subscriber stopped
	}
	close(s.barriers[0])
	s.barriers = s.barriers[1:]
	if len(s.barriers) == 0 {
		s.barriers = nil
	}
}

// flush returns when every subscriber has received every event emitted
// before the call. Called for subscriber me (not nil: the call came through
// the value SubscribeSession handed me), it waits neither for me (its
// queue moves only once its function returns) nor for a subscriber whose
// value was already inside a flush or close when it began (that one may
// be waiting for me). A flush through a subscriber's value waits only for
// subscribers through whose value no flush was in progress when it began,
// so whatever holds one of them up began later: the waits between flushes
// always go from an earlier one to a later one, and never close a circle.
// (A subscriber inside close is stopped, and holds up no flush.)
func (ss *subscribers) flush(me *subscriber) {
	ss.mu.Lock()
	if me != nil {
		me.waiting++
	}
	var waits []chan struct{}
	for _, sub := range ss.list {
		if sub == me || (me != nil && sub.waiting > 0) {
			continue
		}
		if done := make(chan struct{}); sub.barrier(done) {
			waits = append(waits, done)
		}
		sub.start()
	}
	ss.mu.Unlock()
	for _, w := range waits {
		<-w
	}
	if me != nil {
		ss.mu.Lock()
		me.waiting--
		ss.mu.Unlock()
	}
}

// close lets every subscriber deliver what is queued, and waits until they
// have. Called for subscriber me (not nil), it stops me instead (what is
// queued for it is dropped, and any flush waiting on it released), and it
// never waits for a subscriber whose function is inside close called the
// same way: that one was stopped the same way, and may be waiting for me.
// No subscriber is called once it returns, except for the rest of the
// calls in progress in those two cases.
func (ss *subscribers) close(me *subscriber) {
	ss.mu.Lock()
	ss.closed = true
	if me != nil {
		me.inClose = true
		me.stop()
	}
	var wait []*subscriber
	for _, sub := range ss.list {
		if sub.inClose {
			continue
		}
		sub.mu.Lock()
		sub.closing = true
		sub.mu.Unlock()
		sub.start()
		wait = append(wait, sub)
	}
	ss.mu.Unlock()
	for _, sub := range wait {
		sub.waitIdle()
	}
}

func (s *subscriber) push(ev events.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev == nil || s.stopped || s.closing {
		return
	}
	if s.limit > 0 && len(s.queue) >= s.limit {
		s.dropped++
		return
	}
	s.room()
	s.queue = append(s.queue, ev)
}

// room gives an empty queue the spare array, or a new one of spareKept
// events, so that a batch starts without growing from nothing.
func (s *subscriber) room() {
	if s.queue == nil {
		s.queue, s.spare = s.spare[:0], nil
		if s.queue == nil {
			s.queue = make([]events.Event, 0, spareKept)
		}
	}
}

// spareKept is the room a stopped delivery goroutine leaves in spare, at
// most: a waiting subscriber keeps one such array (64 bytes), where
// keeping the largest batch's would keep hundreds. A larger spare is
// replaced by one of this size then, off the path that emits.
const spareKept = 4

// start runs a delivery goroutine when events are queued and none runs.
func (s *subscriber) start() {
	if s.claim() {
		go s.deliverFn()
	}
}

// claim marks a delivery at work when events are queued and none is, and
// reports whether it did: the caller is then to run deliver, on a
// goroutine of its own (start) or on one that has nothing else to do
// (wakeLast).
func (s *subscriber) claim() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running || s.stopped || (len(s.queue) == 0 && s.dropped == 0) {
		return false
	}
	s.running = true
	if s.deliverFn == nil {
		s.deliverFn = s.deliver // set once, before any start reads it
	}
	return true
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
// A function that ends the
// goroutine with runtime.Goexit, which no recover stops, hands what is
// left of the batch back to the queue, and a fresh goroutine delivers it.
func (s *subscriber) deliver() {
	var (
		batch   []events.Event
		next    int // batch[next:] is still to deliver
		dropped int
		normal  bool
	)
	defer func() {
		if normal {
			return
		}
		s.mu.Lock()
		if !s.stopped {
			s.queue = append(batch[next:len(batch):len(batch)], s.queue...)
			s.dropped += dropped
		}
		s.mu.Unlock()
		go s.deliver() // s.running stays true: this one takes over
	}()
	for {
		s.mu.Lock()
		if s.stopped || (len(s.queue) == 0 && s.dropped == 0) {
			s.running = false
			// Nothing to deliver: keep one small array, not the
			// largest batch's (a waiting subscriber holds 64 bytes).
			if cap(s.spare) > spareKept {
				s.spare = nil
			}
			if q := cap(s.queue); q <= spareKept && q > cap(s.spare) {
				s.spare = s.queue
			}
			s.queue = nil
			if s.stopped || s.closing { // nothing more is queued
				s.spare = nil
			} else if s.spare == nil {
				s.spare = make([]events.Event, 0, spareKept)
			}
			if s.idle != nil {
				close(s.idle)
				s.idle = nil
			}
			s.mu.Unlock()
			normal = true
			return
		}
		batch, next = s.queue, 0
		s.queue = s.spare[:0]
		s.spare = nil
		dropped = s.dropped
		s.dropped = 0
		s.mu.Unlock()
		s.deliverBatch(batch, &next, &dropped)
		s.mu.Lock()
		clear(batch) // let the events go
		if s.spare == nil {
			s.spare = batch[:0]
		}
		s.mu.Unlock()
		batch = nil
	}
}

// deliverBatch calls the function on each event of batch from *next on,
// then tells of *dropped events, until the subscriber is stopped (which
// releases the barriers left). It moves *next past each event before the
// call and zeroes *dropped before telling, so that a call that never
// returns (runtime.Goexit) leaves them saying what is left.
func (s *subscriber) deliverBatch(batch []events.Event, next, dropped *int) {
	for *next < len(batch) {
		ev := batch[*next]
		*next++
		if ev == nil {
			s.passBarrier()
			continue
		}
		if !s.call(ev) {
			return
		}
	}
	if n := *dropped; n > 0 {
		*dropped = 0
		s.call(events.EventsDropped{Count: n})
	}
}

// call runs the subscriber's function on ev, recovering a panic so that it
// neither stops the session nor this subscriber's later events (a
// runtime.Goexit is logged too; deliver takes care of the rest). It reports
// false when the subscriber was removed meanwhile.
func (s *subscriber) call(ev events.Event) (alive bool) {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return false
	}
	returned := false
	defer func() {
		if r := recover(); r != nil {
			s.logPanic(ev, r)
			alive = true
		} else if !returned {
			s.logPanic(ev, errGoexit) // deliver carries on
		}
	}()
	s.fn(ev)
	returned = true
	return true
}

// logPanic logs a panic (or a runtime.Goexit) of the subscriber's function
// on ev, with a context holding the subscriber's session value.
func (s *subscriber) logPanic(ev events.Event, value any) {
	c := s.view.core
	logSubscriberPanic(context.WithValue(context.Background(), callerKey{}, s.view), c.logger, c.secrets.text, ev, value)
}
