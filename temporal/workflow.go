package temporal

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
)

// Workflow is the session workflow as a worker runs it: its fields are
// the worker's settings, none of which is part of the workflow's history.
// The zero value is ready to use. Register it with Register on every
// worker of the task queue.
type Workflow struct {
	// Random draws each retry's jitter, in [0, 1); the default is
	// math/rand/v2's Float64. Its draws are recorded as side effects, so
	// a replay sees the same ones.
	Random func() float64
	// RunTimeout bounds one agent run (with Start.Steps, each attempt of
	// one model call or tool call); the default is 10 minutes.
	RunTimeout time.Duration
	// HeartbeatTimeout is how long a run, a step or a summary may go
	// without a heartbeat before its worker is taken for lost; the
	// default is 30 s.
	HeartbeatTimeout time.Duration
	// SummaryTimeout bounds one compaction's summary, all its attempts
	// together; the default is 5 minutes.
	SummaryTimeout time.Duration
	// SummaryAttempts is how many times a compaction's summary is tried
	// when its worker is lost (its activity times out), within
	// SummaryTimeout; the default is 3, at most 100. A summarizer's own
	// error is never tried again: it fails the compaction.
	SummaryAttempts int
	// MaxPayload is the largest payload, in bytes of JSON, the workflow
	// sends the server, which refuses a larger one with the workflow
	// task carrying it, again and again. Over it, a prompt whose run's
	// input would be is refused, a run's input, a step-wise model call's
	// input or a summary's request fails the turn or the compaction with
	// a *PayloadTooLargeError (code payload_too_large), a batch of events
	// for the sink is split, and a continue-as-new waits
	// (docs/temporal.md). 0 means
	// DefaultMaxPayload, under the server's default limit (2 MiB); a
	// negative value checks nothing, for a data converter with a
	// claim-check codec (temporal/claimcheck) that keeps large payloads
	// out of the history. Set it alike on every worker of the task queue.
	MaxPayload int
	// MaxInputs is how many inputs (prompts, run ends, timers, answers)
	// a workflow run feeds the engine before it continues as new, at the
	// next moment no turn is in flight (or earlier, when the server
	// suggests it); the default is 1000.
	MaxInputs int
	// MaxCarried is how many bytes of events not yet delivered a run
	// carries into the one that continues it (Start.Pending); with more,
	// it waits for its sink before continuing as new, refusing prompts
	// meanwhile. The default is 256 KiB.
	MaxCarried int
	// StepAttempts is how many times a step of a step-wise run (a model
	// call or a tool call, Start.Steps) is tried when its activity fails
	// (its worker lost: a heartbeat or start-to-close timeout) before the
	// run is taken for a lost one; the default is 3. The model's own
	// failures are the engine's to retry, never Temporal's.
	StepAttempts int
	// MaxSteps bounds the model calls of one step-wise run; a run that
	// reaches it ends with an error. The default is 100.
	MaxSteps int
}

// WorkflowRegistry is where workflows are registered: a worker.Worker or a
// testsuite environment.
type WorkflowRegistry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Register registers the session workflow as WorkflowName.
func (w *Workflow) Register(r WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(w.Session, workflow.RegisterOptions{Name: WorkflowName})
}

// Start is the session workflow's input.
type Start struct {
	// SessionID is the session's identity; empty means the workflow's
	// ID.
	SessionID string `json:"sessionId,omitempty"`
	// Model is the model the session talks to.
	Model policy.Model `json:"model"`
	// Config is the session's settings; nil means policy.DefaultConfig().
	Config *policy.Config `json:"config,omitempty"`
	// Credentials tells the session that the workers' Activities have a
	// credential store: a usage limit then asks it for another
	// credential.
	Credentials bool `json:"credentials,omitempty"`
	// History is the session's history so far, oldest first: a session
	// started on it goes on from its runtime context.
	History []transcript.Entry `json:"history,omitempty"`
	// Snapshot and Events are set when a session continues as new: the
	// engine's state (on History), and the number of the first event not
	// yet delivered (how many were, when Pending is empty).
	Snapshot *policy.Snapshot `json:"snapshot,omitempty"`
	Events   int64            `json:"events,omitempty"`
	// Pending are the events the run before this one had not yet seen
	// delivered, numbered from Events: a run that is due to continue as
	// new does not wait for its sink, and the next run delivers them
	// first. The batch that was being delivered is among them, so the
	// sink may receive it twice, with the same numbers.
	Pending []json.RawMessage `json:"pending,omitempty"`
	// Steps runs each of the session's runs step by step, on the workers'
	// Activities.Steps (a StepAgent): a model call or a tool call per
	// activity, so that a lost worker repeats only the step in flight.
	// It is fixed for the session's life (carried across
	// continue-as-new), so a replay takes the same path.
	Steps bool `json:"steps,omitempty"`
	// LastErrorClass is, when a session continues as new, its
	// MemoState.LastErrorClass: the memo carried over says it too, but a
	// memo the workers' payload codec encoded cannot be read by the
	// workflow.
	LastErrorClass string `json:"lastErrorClass,omitempty"`
}

// checkPending refuses a Start whose events cannot be delivered as the
// sink's contract says: numbered from a negative number, or a line that is
// not a JSON object (an event's wire line); and one whose LastErrorClass
// is not a class's wire name.
func checkPending(in Start) error {
	if in.Events < 0 {
		return fmt.Errorf("Start.Events is %d: the number of an event is not negative", in.Events)
	}
	if in.LastErrorClass != "" {
		if _, err := classify.ParseClass(in.LastErrorClass); err != nil {
			return fmt.Errorf("Start.LastErrorClass: %w", err)
		}
	}
	for i, l := range in.Pending {
		var ev map[string]json.RawMessage
		if json.Unmarshal(l, &ev) != nil || ev == nil {
			return fmt.Errorf("Start.Pending[%d] is not an event's line (a JSON object): %.40q", i, l)
		}
	}
	return nil
}

// changeContinueBound is the workflow.GetVersion change ID of a run that
// continues as new as soon as it is due and no turn is in flight, carrying
// its undelivered events in Start.Pending, instead of waiting for its
// sink.
const changeContinueBound = "continue-bound"

// errClosed is the error of an update sent after close.
var errClosed = errors.New("temporal: the session is closed")

// Session is the session workflow: it runs until the close signal,
// continuing as new between turns to keep its history short.
func (w *Workflow) Session(ctx workflow.Context, in Start) error {
	d, effects, err := newDriver(ctx, w, in)
	if err != nil {
		return sdktemporal.NewNonRetryableApplicationError(err.Error(), "invalid_start", err)
	}
	d.bounded = workflow.GetVersion(ctx, changeContinueBound, workflow.DefaultVersion, 1) >= 1
	d.ordered = workflow.GetVersion(ctx, changeHistoryOrder, workflow.DefaultVersion, 1) >= 1
	d.results = d.ordered && workflow.GetVersion(ctx, changeHistoryOrderResults, workflow.DefaultVersion, 1) >= 1
	if d.memo = workflow.GetVersion(ctx, changeMemoState, workflow.DefaultVersion, 1) >= 1; d.memo {
		d.loadMemo(ctx, in.LastErrorClass)
	}
	if err := d.handle(ctx); err != nil {
		return err
	}
	workflow.Go(ctx, d.deliver)
	d.apply(ctx, effects)
	d.upsertMemo(ctx)
	for {
		if err := workflow.Await(ctx, func() bool { return d.closing || d.restful() && d.tooLong(ctx) }); err != nil {
			return err
		}
		if !d.closing {
			// Nothing is in flight, and no signal waits (see
			// drainSignals): the next run starts from here, once this one
			// may hand over (readyToContinue).
			if err := workflow.Await(ctx, func() bool {
				return d.closing || workflow.AllHandlersFinished(ctx) && d.readyToContinue()
			}); err != nil {
				return err
			}
			handled, err := d.settle(ctx)
			if err != nil {
				return err
			}
			if handled || d.closing || !d.restful() {
				continue
			}
			if err := d.continueAsNew(ctx); err != nil {
				return err
			}
			continue
		}
		d.apply(ctx, d.engine.Abort(workflow.Now(ctx), errClosed))
		return workflow.Await(ctx, func() bool {
			return quiet(d.engine.Status()) && workflow.AllHandlersFinished(ctx) && len(d.events) == 0 && !d.delivering
		})
	}
}

// newDriver makes the session's engine from in: new, or restored from its
// snapshot.
func newDriver(ctx workflow.Context, w *Workflow, in Start) (*driver, []policy.Effect, error) {
	info := workflow.GetInfo(ctx)
	setup := policy.Setup{SessionID: in.SessionID, Model: in.Model, Config: policy.DefaultConfig(), Credentials: in.Credentials, History: in.History}
	if setup.SessionID == "" {
		setup.SessionID = info.WorkflowExecution.ID
	}
	if in.Config != nil {
		setup.Config = *in.Config
	}
	if err := checkPending(in); err != nil {
		return nil, nil, fmt.Errorf("temporal: session %q: %w", setup.SessionID, err)
	}
	d := &driver{root: ctx, w: w, creds: in.Credentials, steps: in.Steps, seq: in.Events, events: in.Pending, history: append([]transcript.Entry(nil), in.History...)}
	d.setup = setup
	d.setup.History = nil
	var effects []policy.Effect
	var err error
	if in.Snapshot != nil {
		d.engine, effects, err = policy.Restore(setup, *in.Snapshot, workflow.Now(ctx), 0)
	} else {
		d.engine, err = policy.New(setup)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("temporal: session %q: %w", setup.SessionID, err)
	}
	return d, effects, nil
}

// handle sets up the query, the updates and the signals.
func (d *driver) handle(ctx workflow.Context) error {
	if d.ordered {
		// Before the handlers: an update that waited for them runs as
		// soon as its handler is set.
		d.barrier = workflow.NewBufferedChannel(ctx, 1)
		d.wake = workflow.NewBufferedChannel(ctx, 1)
	}
	if err := workflow.SetQueryHandler(ctx, QueryState, d.state); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePrompt, d.prompt, workflow.UpdateHandlerOptions{
		Validator: func(ctx workflow.Context, _ string) error { return d.continuing(ctx) },
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateCompact, d.compact, workflow.UpdateHandlerOptions{
		Validator: func(ctx workflow.Context, _ string) error { return d.continuing(ctx) },
	}); err != nil {
		return err
	}
	d.signals = []signal{
		{SignalAbort, func(ctx workflow.Context, _ *bool) {
			d.feed(ctx, func(at time.Time) []policy.Effect { return d.engine.Abort(at, policy.ErrAborted) })
		}},
		{SignalAbortRetry, func(ctx workflow.Context, _ *bool) { d.feed(ctx, d.engine.AbortRetry) }},
		{SignalAbortCompaction, func(ctx workflow.Context, _ *bool) { d.feed(ctx, d.engine.AbortCompaction) }},
		{SignalSetAutoRetry, d.setting(SignalSetAutoRetry, d.engine.SetRetryEnabled)},
		{SignalSetAutoCompaction, d.setting(SignalSetAutoCompaction, d.engine.SetCompactionEnabled)},
		{SignalClose, func(workflow.Context, *bool) { d.closing = true }},
	}
	if d.ordered {
		workflow.Go(ctx, d.listen)
		return nil
	}
	for _, s := range d.signals {
		ch := workflow.GetSignalChannel(ctx, s.name)
		workflow.Go(ctx, func(ctx workflow.Context) {
			for {
				// A payload that is not a bool (or null) is dropped, and
				// logged, by the SDK.
				var on *bool
				ch.Receive(ctx, &on)
				s.handle(ctx, on)
			}
		})
	}
	return nil
}

// signal is a signal's handler; the bool is the signal's argument, for
// the two that take one (nil when it came without).
type signal struct {
	name   string
	handle func(ctx workflow.Context, on *bool)
}

// setting is the handler of a signal that writes a setting with set: one
// that carries no bool is logged and changes nothing.
func (d *driver) setting(name string, set func(bool)) func(workflow.Context, *bool) {
	return func(ctx workflow.Context, on *bool) {
		if on == nil {
			workflow.GetLogger(ctx).Error("temporal: a signal without its bool changes nothing", "signal", name)
			return
		}
		set(*on)
	}
}

// drainSignals handles the signals already received but not yet handled,
// and reports whether there were any: a run that continues as new must
// leave none behind.
func (d *driver) drainSignals(ctx workflow.Context) bool {
	handled := false
	for _, s := range d.signals {
		ch := workflow.GetSignalChannel(ctx, s.name)
		for {
			var on *bool
			if !ch.ReceiveAsync(&on) {
				break
			}
			handled = true
			s.handle(ctx, on)
		}
	}
	return handled
}

// state answers the get_state query.
func (d *driver) state() (rpc.State, error) {
	return rpc.StateOf(d.engine.SessionID(), d.engine.Model(), d.engine.Status(), d.engine.LastCompactionTruncated()), nil
}

// prompt is the prompt update: it starts a turn and completes when the
// turn settles.
func (d *driver) prompt(ctx workflow.Context, text string) error {
	if d.closing {
		return turnError(errClosed)
	}
	if err := d.fitsPrompt(ctx, text); err != nil {
		return turnError(err)
	}
	effects, err := d.engine.Prompt(workflow.Now(ctx), text)
	if err != nil {
		return turnError(err)
	}
	d.inputs++
	t := &waiter{}
	d.turn = t
	d.apply(ctx, effects)
	if err := workflow.Await(ctx, func() bool { return t.done }); err != nil {
		return err
	}
	return turnError(t.err)
}

// compact is the compact update: a manual compaction.
func (d *driver) compact(ctx workflow.Context, instructions string) (transcript.Compaction, error) {
	if d.closing {
		return transcript.Compaction{}, turnError(errClosed)
	}
	effects, err := d.engine.Compact(workflow.Now(ctx), instructions)
	d.inputs++
	var c *waiter
	if err == nil {
		c = &waiter{}
		d.manual = c
	}
	d.apply(ctx, effects)
	if err != nil {
		return transcript.Compaction{}, turnError(err)
	}
	if err := workflow.Await(ctx, func() bool { return c.done }); err != nil {
		return transcript.Compaction{}, err
	}
	if c.err != nil {
		return transcript.Compaction{}, turnError(c.err)
	}
	return c.result, nil
}

// waiter is an update waiting for the engine: a turn or a manual
// compaction.
type waiter struct {
	done   bool
	err    error
	result transcript.Compaction
}

// turnError is err as an update's error: an application error whose type
// is err's code and whose message is err's. The code is the turn_settled
// code (docs/rpc.md) of a turn's error, else one of localCodes, else
// "error". nil stays nil.
func turnError(err error) error {
	if err == nil {
		return nil
	}
	// The turn_settled code first: a turn's error may wrap a local one
	// (a failed compaction's, in an overflow not recovered), and the
	// update says what the turn_settled event says.
	code := ""
	if line, merr := rpc.MarshalEvent(events.TurnSettled{Err: err}); merr == nil {
		var w struct {
			Code string `json:"code"`
		}
		if json.Unmarshal(line, &w) == nil {
			code = w.Code
		}
	}
	for _, c := range localCodes {
		if code == "" && errors.Is(err, c.err) {
			code = c.code
		}
	}
	if code == "" {
		code = "error"
	}
	return sdktemporal.NewNonRetryableApplicationError(err.Error(), code, nil)
}

// localCodes are the codes of the errors an update meets that settle no
// turn.
var localCodes = []struct {
	code string
	err  error
}{
	{"busy", policy.ErrBusy},
	{"nothing_to_compact", policy.ErrNothingToCompact},
	{"already_compacted", policy.ErrAlreadyCompacted},
	{"compaction_cancelled", policy.ErrCompactionCancelled},
	{"closed", errClosed},
}

// readyToContinue reports whether a run with nothing in flight may hand
// over to the next. A bounded run (changeContinueBound) continues as new
// at once, whatever prompts come (the updates' validators refuse them
// meanwhile, see continuing), without waiting for the sink: the events it
// has not taken go with the input, unless they are more than MaxCarried
// bytes. A run started before it waits until the sink has taken every
// event.
func (d *driver) readyToContinue() bool {
	if d.bounded {
		return d.carried() <= orDefaultInt(d.w.MaxCarried, 256<<10)
	}
	return len(d.events) == 0 && !d.delivering
}

// continueAsNew returns the error that continues the session as new, or
// nil when the new run's input is over the payload limit: when the events
// it would carry make it so, once the sink has taken them (it is looked at
// again then); otherwise the server would refuse it, and the workflow task
// with it, again and again, so this run goes on instead (tooLong is false
// until its next input).
func (d *driver) continueAsNew(ctx workflow.Context) error {
	next := d.next()
	err := d.tooLarge(ctx, "the input of a continue-as-new", next)
	if err == nil {
		return workflow.NewContinueAsNewError(ctx, WorkflowName, next)
	}
	if len(next.Pending) > 0 {
		// The events it carries make it too large: they are delivered
		// first, then it is looked at again.
		return workflow.Await(ctx, func() bool { return d.closing || d.carried() == 0 })
	}
	workflow.GetLogger(ctx).Error("temporal: cannot continue as new", "error", err)
	d.stayAt = d.inputs + 1
	return nil
}

// restful reports whether the session can continue as new: nothing in
// flight, no turn and no manual compaction waiting, the machine idle.
func (d *driver) restful() bool {
	return quiet(d.engine.Status()) && d.turn == nil && d.manual == nil && d.engine.Status().State == states.Idle
}

// tooLong reports whether this run of the workflow has fed the engine
// enough to continue as new.
func (d *driver) tooLong(ctx workflow.Context) bool {
	limit := d.w.MaxInputs
	if limit <= 0 {
		limit = 1000
	}
	if d.stayAt == d.inputs+1 {
		return false // its input is too large; see Session
	}
	return d.inputs >= limit || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

// continuing is the prompt and compact updates' validator: it refuses an
// update, with code "continuing", while this run is about to continue as
// new (it is due and nothing is in flight), so that no turn starts in a
// run that is over. A refused update is not in the history; sent again
// (Prompt does), it reaches the next run. The SDK runs the handlers of the
// updates a workflow task brings before the workflow's own code, so
// without it a prompt that came with the task in which the server
// suggested continuing as new would start a turn and put it off.
func (d *driver) continuing(ctx workflow.Context) error {
	if d.bounded && !d.closing && d.restful() && d.tooLong(ctx) {
		return sdktemporal.NewApplicationError("temporal: the session is continuing as new: send the update again", codeContinuing)
	}
	return nil
}

// carried is how many bytes of events the run has not seen delivered.
func (d *driver) carried() int {
	n := 0
	for _, l := range d.sending {
		n += len(l)
	}
	for _, l := range d.events {
		n += len(l)
	}
	return n
}

func orDefaultInt(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}

// codeContinuing is the type of the error of an update refused while the
// run continues as new: send it again.
const codeContinuing = "continuing"

// next is the input of the run that continues this one: the engine's
// snapshot on a history cut down to what rebuilds it, and the events not
// yet delivered (the batch in delivery among them).
func (d *driver) next() Start {
	snap := d.engine.Snapshot()
	history := shorten(d.history, d.engine.Messages())
	snap.History = len(history)
	var pending []json.RawMessage
	if len(d.sending)+len(d.events) > 0 {
		pending = append(append(pending, d.sending...), d.events...)
	}
	return Start{SessionID: d.engine.SessionID(), Model: d.engine.Model(), Config: &snap.Config, Credentials: d.creds, History: history, Snapshot: &snap, Events: d.seq, Pending: pending, Steps: d.steps, LastErrorClass: d.lastClass}
}

// quiet reports whether nothing is in flight in an engine of status st: no
// run and no compaction.
func quiet(st policy.Status) bool { return !st.Streaming && !st.Compacting }
