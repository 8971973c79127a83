package temporal

import (
	"slices"

	"go.temporal.io/sdk/workflow"
)

// changeHistoryOrder is the workflow.GetVersion change ID of a workflow
// that feeds the engine its signals and its backoff's timer from one
// selector, in the order the history has them, instead of one coroutine
// each, run in the order the coroutines were made (the signals' first).
// The activities' results take the same selector from
// changeHistoryOrderResults on.
const changeHistoryOrder = "history-order"

// changeHistoryOrderResults is the workflow.GetVersion change ID of a
// workflow whose activities' results (a run's end, plain or step by step;
// a summary; the credential store's answer; a delivery) are fed to the
// engine from listen's selector too, in the order the history has them
// with the signals and the backoff's timer, instead of from their
// coroutines in the order the coroutines run. It is asked for only in a
// workflow that has changeHistoryOrder.
const changeHistoryOrderResults = "history-order-results"

// listen is the coroutine that feeds the engine the signals, the
// backoff's timer and (changeHistoryOrderResults) the activities' results
// in history order: a selector blocked on all of them is woken by the
// first that the workflow task's events deliver, so a timer that fired
// before a signal arrived is handled first, as a session in process would.
// A selector is made for each input, with the signals first, then the
// futures waited for, in the order they were made, and the channels of
// the wake-up and of the barrier last: of the inputs a task brings at
// once, only the first is picked in history order, the rest in that
// order.
func (d *driver) listen(ctx workflow.Context) {
	for {
		sel := workflow.NewSelector(ctx)
		for _, s := range d.signals {
			sel.AddReceive(workflow.GetSignalChannel(ctx, s.name), func(c workflow.ReceiveChannel, _ bool) {
				var on *bool
				c.Receive(ctx, &on)
				d.signalled++
				s.handle(ctx, on)
			})
		}
		for _, w := range d.futures {
			sel.AddFuture(w.f, func(workflow.Future) {
				d.futures = slices.DeleteFunc(d.futures, func(x *waiting) bool { return x == w })
				w.handle(ctx)
			})
		}
		// A timer armed while the selector waits wakes it, to be added.
		sel.AddReceive(d.wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		sel.AddReceive(d.barrier, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			if sel.HasPending() {
				// An input came first: handle it, then pass the
				// barrier.
				d.barrier.SendAsync(nil)
				return
			}
			d.passed = true
		})
		sel.Select(ctx)
	}
}

// waiting is a future listen waits for, and what to do once it is ready
// (handle's Get does not block then).
type waiting struct {
	f      workflow.Future
	handle func(ctx workflow.Context)
}

// when calls handle once the timer's future f is ready: from listen, in
// history order with the signals, or, in a workflow that predates it,
// from a coroutine of its own that waits for f (handle's Get then blocks
// until f is ready).
func (d *driver) when(f workflow.Future, handle func(ctx workflow.Context)) {
	if !d.ordered {
		workflow.Go(d.root, handle)
		return
	}
	d.futures = append(d.futures, &waiting{f: f, handle: handle})
	d.wake.SendAsync(nil)
}

// gate is a coroutine's turn at listen (see await): listen sends on
// picked once it has picked the coroutine's future, the coroutine on done
// once it is through with it. Channels, not flags awaited: a coroutine
// that sends tells the dispatcher it made progress, and the other is run
// again.
type gate struct{ picked, done workflow.Channel }

// await blocks the coroutine of ctx until f, an activity's or a timer's
// future, is ready and listen has picked it, in history order among the
// signals and the other futures, and returns with listen held: listen
// waits until the coroutine calls release, after it has fed the engine
// what f brought, so that no signal that came after f is handled before.
// The coroutine must call release before it blocks again (on another
// await among others) and before it returns; a second call does nothing.
// In a workflow that predates changeHistoryOrderResults, await returns at
// once (f's Get then blocks until f is ready) and release does nothing.
func (d *driver) await(ctx workflow.Context, f workflow.Future) (release func()) {
	if !d.results {
		return func() {}
	}
	g := &gate{picked: workflow.NewBufferedChannel(ctx, 1), done: workflow.NewBufferedChannel(ctx, 1)}
	d.futures = append(d.futures, &waiting{f: f, handle: func(ctx workflow.Context) {
		g.picked.Send(ctx, nil)
		g.done.Receive(ctx, nil)
	}})
	d.wake.SendAsync(nil)
	g.picked.Receive(ctx, nil)
	released := false
	return func() {
		if !released {
			released = true
			g.done.Send(ctx, nil)
		}
	}
}

// settle waits until listen has handled every signal and timer already
// received, and reports whether it handled a signal meanwhile: a run
// that continues as new must leave none behind. It is drainSignals in
// history order.
func (d *driver) settle(ctx workflow.Context) (bool, error) {
	if !d.ordered {
		return d.drainSignals(ctx), nil
	}
	n := d.signalled
	d.passed = false
	d.barrier.SendAsync(nil)
	if err := workflow.Await(ctx, func() bool { return d.passed }); err != nil {
		return false, err
	}
	return d.signalled != n, nil
}
