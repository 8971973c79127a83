package temporal

import (
	"encoding/json"
	"errors"
	mrand "math/rand/v2"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/transcript"
)

// driver carries out the engine's effects in the workflow, as package
// session's executor does in process: a run is an activity, the backoff a
// timer, a summary an activity, the credential store's answer an activity,
// the history a slice of the workflow's state, the events a queue the
// sink's activity drains in order. Coroutines of the workflow feed it one
// input at a time (they never run at once), and each input is taken at
// the workflow's time.
type driver struct {
	root   workflow.Context // the workflow's: what the activities and timers hang on
	w      *Workflow
	engine *policy.Engine
	// setup is what the engine was made from, less its history.
	setup policy.Setup
	creds bool
	// steps runs the runs step by step (Start.Steps).
	steps bool
	// history is every entry the session wrote, in order.
	history []transcript.Entry
	// inputs counts what this run of the workflow fed the engine.
	inputs int

	timerID     policy.TimerID
	timerCancel workflow.CancelFunc
	runID       policy.RunID
	runCancel   workflow.CancelFunc
	cancelled   policy.RunID // the last run the engine cancelled
	compID      policy.CompactionID
	compCancel  workflow.CancelFunc

	// turn waits for the turn in flight, manual for a manual compaction.
	turn   *waiter
	manual *waiter

	// events are the lines not yet handed to the sink; seq numbers the
	// first of sending and events; delivering reports a delivery in
	// progress, sending is its batch.
	events     []json.RawMessage
	seq        int64
	delivering bool
	sending    []json.RawMessage
	// bounded reports a run that continues as new without waiting for the
	// sink (changeContinueBound).
	bounded bool
	// memo reports a workflow that keeps its MemoState in its memo
	// (changeMemoState); memoLast is the one written, lastClass the last
	// error's class, timerAt the armed timer's deadline.
	// ordered reports a workflow whose signals and timer listen takes
	// (changeHistoryOrder): futures are the timers (and results) it waits
	// for besides the signals, barrier and passed settle's, wake listen's
	// wake-up, signalled counts the signals handled.
	ordered bool
	// results reports a workflow whose activities' results listen takes
	// too (changeHistoryOrderResults; see await).
	results   bool
	futures   []*waiting
	barrier   workflow.Channel
	wake      workflow.Channel
	passed    bool
	signalled int
	memo      bool
	memoSet   bool
	memoLast  MemoState
	lastClass string
	timerAt   time.Time

	signals []signal
	closing bool
	// stayAt is 1 + d.inputs when the input of a continue-as-new was
	// over Workflow.MaxPayload: the run goes on until the engine's next
	// input (a compaction may have made it smaller); 0 otherwise.
	stayAt int
}

// feed gives the engine one input, at the workflow's time, and carries out
// its effects. ctx is the running coroutine's.
func (d *driver) feed(ctx workflow.Context, input func(at time.Time) []policy.Effect) {
	d.inputs++
	d.apply(ctx, input(workflow.Now(ctx)))
}

// apply carries out effects, in order. An answer the engine waits for at
// once (an append it awaits) is fed back once the batch is done, since
// feeding the engine reuses the slice the batch is in.
func (d *driver) apply(ctx workflow.Context, effects []policy.Effect) {
	var feedback []func(time.Time) []policy.Effect
	for i := range effects {
		ef := &effects[i]
		switch ef.Kind {
		case policy.Emit:
			d.noteEvent(ef.Event)
			d.emit(ctx, ef.Event)
		case policy.StartRun:
			d.startRun(ef.Run, newRunInput(d.engine, ef))
		case policy.CancelRun:
			d.cancelled = ef.Run
			if d.runID == ef.Run && d.runCancel != nil {
				d.runCancel()
			}
		case policy.StartTimer:
			d.startTimer(ctx, ef.Timer, ef.Deadline)
		case policy.StopTimer:
			d.stopTimer()
		case policy.StartCompaction:
			d.startCompaction(ef.Compaction, *ef.Request)
		case policy.CancelCompaction:
			if d.compID == ef.Compaction && d.compCancel != nil {
				d.compCancel()
			}
		case policy.Append:
			// The history is the workflow's own: an append cannot fail.
			d.history = append(d.history, ef.Entries...)
			if ef.Await {
				feedback = append(feedback, func(at time.Time) []policy.Effect { return d.engine.Appended(at, nil) })
			}
		case policy.MarkUsageLimit:
			d.markUsageLimit(ef.Hint)
		case policy.FinishTurn:
			if t := d.turn; t != nil {
				t.done, t.err = true, ef.Err
				d.turn = nil
			}
		case policy.FinishCompact:
			if c := d.manual; c != nil {
				c.done, c.err = true, ef.Err
				if ef.Result != nil {
					c.result = *ef.Result
				}
				d.manual = nil
			}
		}
	}
	for _, f := range feedback {
		d.feed(ctx, f)
	}
	d.engine.Release() // carried out: the next input reuses their room
	d.upsertMemo(ctx)
}

// newRunInput is the run activity's input for a StartRun effect: the one
// place that reads the runtime context the effect carries. The prompt,
// the context's last message, is left out of the context (PromptOmitted):
// the history holds it once.
func newRunInput(e *policy.Engine, ef *policy.Effect) RunInput {
	in := RunInput{SessionID: e.SessionID(), Prompt: ef.Prompt, Context: ef.Context, Model: ef.Model}
	if n := len(ef.Context); ef.Prompt != nil && n > 0 {
		in.Context, in.PromptOmitted = ef.Context[:n-1:n-1], true
	}
	return in
}

// startRun starts run id's activity. Temporal never retries it (the
// engine decides what a failed run comes to); a cancelled run's activity
// is waited for, so the events the agent reports on its way out arrive.
func (d *driver) startRun(id policy.RunID, in RunInput) {
	if tooLarge := d.tooLarge(d.root, "the run's input", in); tooLarge != nil {
		// Scheduled, the input would fail every workflow task: the run
		// could not start, and its turn fails.
		d.runID, d.runCancel = id, nil
		workflow.Go(d.root, func(ctx workflow.Context) {
			d.feed(ctx, func(at time.Time) []policy.Effect {
				return d.engine.RunReturned(at, id, policy.RunReturn{Err: tooLarge})
			})
		})
		return
	}
	ctx, cancel := workflow.WithCancel(d.root)
	d.runID, d.runCancel = id, cancel
	if d.steps {
		workflow.Go(d.root, func(gctx workflow.Context) { d.runSteps(ctx, gctx, id, in) })
		return
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: orDefault(d.w.RunTimeout, 10*time.Minute),
		HeartbeatTimeout:    orDefault(d.w.HeartbeatTimeout, 30*time.Second),
		RetryPolicy:         &sdktemporal.RetryPolicy{MaximumAttempts: 1},
		WaitForCancellation: true,
	})
	f := workflow.ExecuteActivity(ctx, ActivityRun, in)
	workflow.Go(d.root, func(ctx workflow.Context) {
		// In history order with the signals: listen waits until the
		// run's end is fed (see await).
		defer d.await(ctx, f)()
		var res RunResult
		ret := policy.RunReturn{}
		err := f.Get(ctx, &res)
		if d.runID == id {
			d.runCancel = nil
		}
		var timeout *sdktemporal.TimeoutError
		if errors.As(err, &timeout) && d.cancelled != id && d.engine.Snapshot().InFlight != "" {
			d.interrupted(ctx)
			return
		}
		if err != nil {
			// The activity failed otherwise (it was cancelled before it
			// started, or the worker has no agent): the run reported
			// nothing, and the engine takes it for a run that could not
			// start.
			ret.Err = err
		}
		if res.TooLarge != nil {
			// The result was left out: what the run reported is lost,
			// and the turn fails with it.
			d.feed(ctx, func(at time.Time) []policy.Effect {
				return d.engine.RunReturned(at, id, policy.RunReturn{Err: res.TooLarge, Credential: res.Credential})
			})
			return
		}
		for _, e := range res.Events {
			ev, err := e.event()
			if err != nil {
				workflow.GetLogger(ctx).Error("temporal: dropped an agent event", "error", err)
				continue
			}
			d.feed(ctx, func(at time.Time) []policy.Effect { return d.engine.RunEvent(at, id, ev) })
		}
		if res.Err != "" {
			ret.Err = errors.New(res.Err)
		}
		if res.Panic != "" {
			ret.Panic = res.Panic
		}
		ret.Credential = res.Credential
		if h := res.Held; h != nil {
			ret.HeldUntil, ret.HeldKey, ret.HeldReason = h.Until, h.Key, h.Reason
		}
		ret.Draw = d.draw(ctx)
		d.feed(ctx, func(at time.Time) []policy.Effect { return d.engine.RunReturned(at, id, ret) })
	})
}

// interrupted goes on from a run whose activity timed out: its worker was
// lost mid-run, and what the agent reported is lost with it. The engine is
// restored from its own snapshot, as a session restored in another process
// is: the run in flight goes through the decision as a transient failure
// of its attempt (policy.Restore), so the chain retries it within its
// limits, and a turn in flight settles as it would have.
func (d *driver) interrupted(ctx workflow.Context) {
	snap := d.engine.Snapshot()
	setup := d.setup
	setup.History = d.history
	engine, effects, err := policy.Restore(setup, snap, workflow.Now(ctx), d.draw(ctx))
	if err != nil {
		// The snapshot is the engine's own, on its own history: this
		// cannot happen but by a defect, which the log reports.
		workflow.GetLogger(ctx).Error("temporal: cannot restore after a lost run", "error", err)
		return
	}
	d.inputs++
	// The new engine numbers its runs and timers on after the old one's
	// (the snapshot's Tickets): forget which of them was cancelled.
	d.engine, d.cancelled = engine, 0
	d.apply(ctx, effects)
}

// draw is a random number for a retry's jitter, recorded in the history.
func (d *driver) draw(ctx workflow.Context) float64 {
	random := d.w.Random
	if random == nil {
		random = mrand.Float64
	}
	var r float64
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return random() }).Get(&r); err != nil {
		return 0
	}
	return r
}

// startTimer arms the backoff's timer for deadline, replacing any armed
// one. It fires as the engine's timer id: at the deadline, by the
// workflow's clock.
func (d *driver) startTimer(ctx workflow.Context, id policy.TimerID, deadline time.Time) {
	d.stopTimer()
	tctx, cancel := workflow.WithCancel(d.root)
	d.timerID, d.timerCancel, d.timerAt = id, cancel, deadline
	f := workflow.NewTimer(tctx, max(deadline.Sub(workflow.Now(ctx)), 0))
	d.when(f, func(ctx workflow.Context) {
		if err := f.Get(ctx, nil); err != nil {
			return // stopped
		}
		if d.timerID == id {
			d.timerCancel = nil
		}
		// The timer is for this deadline: the workflow's clock is not
		// before it when it fires.
		d.feed(ctx, func(at time.Time) []policy.Effect { return d.engine.TimerFired(later(at, deadline), id) })
	})
}

func (d *driver) stopTimer() {
	if d.timerCancel != nil {
		d.timerCancel()
		d.timerCancel = nil
	}
}

// changeSummaryAttempts is the workflow.GetVersion change ID of a summary
// scheduled with Workflow.SummaryAttempts attempts; a history without its
// marker scheduled its summary for one attempt (the release before it) or
// was recorded before the marker (histories/v2, whose summaries did not
// fail).
const changeSummaryAttempts = "summary-attempts"

// changeSummaryAgain is the workflow.GetVersion change ID of a summary of
// one attempt, lost with its worker, made again by the worker that took
// the session on; a history without its marker fed the failure to the
// engine, as the release before it did.
const changeSummaryAgain = "summary-again"

// lostWorker reports whether an activity's err is its worker's loss: a
// heartbeat or start-to-close timeout, not an error or a cancellation.
func lostWorker(err error) bool {
	var te *sdktemporal.TimeoutError
	if !errors.As(err, &te) {
		return false
	}
	return te.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT || te.TimeoutType() == enumspb.TIMEOUT_TYPE_START_TO_CLOSE
}

// startCompaction starts compaction id's summary activity. A summary is
// idempotent (it reads the request and writes nothing), so an attempt
// lost with its worker (its heartbeat or its start-to-close timed out) is
// made again, within the compaction's own limits: Workflow.SummaryTimeout
// for all attempts together, and Workflow.SummaryAttempts attempts. The
// summarizer's own failure is the result's, not the activity's, so it is
// never retried. The retry policy is an option of the command, not a
// command: a recorded history replays the same under either.
func (d *driver) startCompaction(id policy.CompactionID, req policy.SummaryRequest) {
	if tooLarge := d.tooLarge(d.root, "the summary's request", req); tooLarge != nil {
		// Scheduled, the request would fail every workflow task: the
		// compaction fails.
		d.compID, d.compCancel = id, nil
		workflow.Go(d.root, func(ctx workflow.Context) {
			d.feed(ctx, func(at time.Time) []policy.Effect {
				return d.engine.CompactionFinished(at, id, policy.Summary{}, tooLarge)
			})
		})
		return
	}
	// A summary scheduled before changeSummaryAttempts had one attempt
	// (the server keeps the retry policy it was scheduled with): a
	// previous release's worker lost in it leaves it failed by a timeout,
	// and the worker that takes the session on makes it again, once, with
	// this release's attempts.
	retried := workflow.GetVersion(d.root, changeSummaryAttempts, workflow.DefaultVersion, 1) >= 1
	actx, cancel := workflow.WithCancel(d.root)
	d.compID, d.compCancel = id, cancel
	timeout := orDefault(d.w.SummaryTimeout, 5*time.Minute)
	attempts := d.w.SummaryAttempts
	if attempts <= 0 {
		attempts = 3
	}
	actx = workflow.WithActivityOptions(actx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: timeout,
		StartToCloseTimeout:    timeout,
		HeartbeatTimeout:       orDefault(d.w.HeartbeatTimeout, 30*time.Second),
		RetryPolicy: &sdktemporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Second,
			MaximumAttempts:    int32(min(attempts, 100)),
		},
	})
	f := workflow.ExecuteActivity(actx, ActivitySummarize, req)
	workflow.Go(d.root, func(ctx workflow.Context) {
		defer d.await(ctx, f)()
		var res SummaryResult
		err := f.Get(ctx, &res)
		if err != nil && !retried && lostWorker(err) &&
			workflow.GetVersion(ctx, changeSummaryAgain, workflow.DefaultVersion, 1) >= 1 {
			res = SummaryResult{}
			err = workflow.ExecuteActivity(actx, ActivitySummarize, req).Get(ctx, &res)
		}
		if d.compID == id {
			d.compCancel = nil
		}
		if err == nil && res.Err != "" {
			err = errors.New(res.Err)
		}
		if err == nil && res.TooLarge != nil {
			err = res.TooLarge
		}
		d.feed(ctx, func(at time.Time) []policy.Effect { return d.engine.CompactionFinished(at, id, res.Summary, err) })
	})
}

// markUsageLimit asks the credential store's activity about a usage limit
// and feeds its answer; a store that cannot be reached switched nothing.
func (d *driver) markUsageLimit(hint time.Duration) {
	ctx := workflow.WithActivityOptions(d.root, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		// Marking a limit twice would block a second credential.
		RetryPolicy: &sdktemporal.RetryPolicy{MaximumAttempts: 1},
	})
	f := workflow.ExecuteActivity(ctx, ActivityMarkUsageLimit, UsageLimit{SessionID: d.engine.SessionID(), Model: d.engine.Model(), Hint: hint})
	workflow.Go(d.root, func(ctx workflow.Context) {
		defer d.await(ctx, f)()
		var switched bool
		if err := f.Get(ctx, &switched); err != nil {
			workflow.GetLogger(ctx).Error("temporal: the credential store failed", "error", err)
			switched = false
		}
		d.feed(ctx, func(at time.Time) []policy.Effect { return d.engine.UsageLimitAnswered(at, switched) })
	})
}

// emit queues ev's wire line for the sink.
func (d *driver) emit(ctx workflow.Context, ev events.Event) {
	line, err := rpc.MarshalEvent(ev)
	if err != nil {
		workflow.GetLogger(ctx).Error("temporal: an event has no wire form", "error", err)
		return
	}
	d.events = append(d.events, line)
}

// deliver is the coroutine that hands the queued events to the sink's
// activity, in order, one delivery at a time. A delivery that still fails
// after its retries is dropped (and logged), so that a broken sink cannot
// hold the session.
func (d *driver) deliver(ctx workflow.Context) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &sdktemporal.RetryPolicy{MaximumAttempts: 10},
	})
	for {
		if err := workflow.Await(ctx, func() bool { return len(d.events) > 0 }); err != nil {
			return
		}
		batch := Delivery{SessionID: d.engine.SessionID(), First: d.seq, Lines: d.events}
		d.events = nil
		if n := d.fits(batch.Lines); n < len(batch.Lines) && limited(ctx) {
			// Larger than a payload may be: the rest waits for the next
			// delivery.
			batch.Lines, d.events = batch.Lines[:n:n], batch.Lines[n:]
		}
		d.delivering, d.sending = true, batch.Lines
		if err := workflow.ExecuteActivity(actx, ActivityDeliver, batch).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Error("temporal: events not delivered", "first", batch.First, "count", len(batch.Lines), "error", err)
		}
		d.seq += int64(len(batch.Lines))
		d.delivering, d.sending = false, nil
	}
}

// fits returns how many of lines, from the first, a delivery carries
// within Workflow.MaxPayload: at least one (a line alone over the limit
// goes alone; it cannot be cut).
func (d *driver) fits(lines []json.RawMessage) int {
	limit := payloadLimit(d.w.MaxPayload)
	if limit <= 0 {
		return len(lines)
	}
	size := 256 // the Delivery around the lines: its session ID, numbers, brackets
	for i, l := range lines {
		size += len(l) + 1
		if size > limit && i > 0 {
			return i
		}
	}
	return len(lines)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}
