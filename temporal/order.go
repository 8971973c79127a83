package temporal

import (
	"slices"

	"go.temporal.io/sdk/workflow"
)

// changeHistoryOrder is the workflow.GetVersion change ID of a workflow
// that feeds the engine its signals and its backoff's timer from one
// selector, in the order the history has them, instead of one coroutine
// each, run in the order the coroutines were made (the signals' first).
// The activities' results still each have a coroutine of their own.
const changeHistoryOrder = "history-order"

// listen is the coroutine that feeds the engine the signals and the
// backoff's timer in history order: a selector blocked on all of them is
// woken by the first that the workflow task's events deliver, so a timer
// that fired before a signal arrived is handled first, as a session in
// process would. A selector is made for each input, with the timer then
// armed, and the channels of the wake-up and of the barrier last.
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
