package temporal

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/agentfsm/agentfsm/policy"
)

// changeHistoryOrder is the workflow.GetVersion change ID of a workflow
// that feeds the engine its signals and its backoff's timer from one
// selector, in the order the history has them, instead of one coroutine
// each, run in the order the coroutines were made (the signals' first).
const changeHistoryOrder = "history-order"

// listen is the coroutine that takes the signals and the timer in history
// order: a selector blocked on all of them is woken by the first that the
// workflow task's events deliver, so a timer that fired before a signal
// arrived is handled first, as a session in process would. A selector is
// made for each input, with the timer armed then, and the channels of
// the wake-up and of the barrier last.
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
		if t := d.timer; t != nil {
			sel.AddFuture(t.f, func(f workflow.Future) {
				if d.timer == t {
					d.timer = nil
				}
				if f.Get(ctx, nil) != nil {
					return // stopped
				}
				if d.timerID == t.id {
					d.timerCancel = nil
				}
				// The timer is for this deadline: the workflow's clock is
				// not before it when it fires.
				d.feed(ctx, func(at time.Time) []policy.Effect { return d.engine.TimerFired(later(at, t.deadline), t.id) })
			})
		}
		// A timer armed while the selector waits wakes it, to be added.
		sel.AddReceive(d.wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		sel.AddReceive(d.barrier, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			if sel.HasPending() {
				// A signal or the timer came first: handle it, then pass
				// the barrier.
				d.barrier.SendAsync(nil)
				return
			}
			d.passed = true
		})
		sel.Select(ctx)
	}
}

// armed is a timer that listen waits for.
type armed struct {
	f        workflow.Future
	id       policy.TimerID
	deadline time.Time
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
