package policy

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/wiretext"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

// run is the run in flight.
type run struct {
	id           RunID
	continuation bool
	// emitted: the agent reported something (agent_start or later).
	emitted bool
	// started: the run made a model call: an assistant message began. A
	// run that ends without one could not start.
	started bool
	ended   bool
	// aborted: Abort cancelled the run. Its last events are reported but
	// decide nothing: no retry, compaction or continuation can come of
	// them.
	aborted  bool
	messages []transcript.Message
	last     *transcript.Message // the run's last assistant message
	// first holds messages' first element: most runs end after one
	// message, which then costs no allocation of its own.
	first [1]transcript.Message
}

// RunReturn is how a run ended, as its driver saw it.
type RunReturn struct {
	// Err is the error the agent's run returned.
	Err error
	// Panic is the value the agent panicked with, recovered by the
	// driver; nil when it did not panic.
	Panic any
	// Draw is a random number in [0, 1) for the retry's jitter, should the
	// decision schedule one.
	Draw float64
	// Credential is the ID of the credential the run called its provider
	// with, "" for none: the retry it leads to names it.
	Credential string
	// HeldUntil is set when the driver did not start the run because a
	// limit shared by the sessions of a process (session.WithLimiter)
	// holds the key of its provider and credential until then: the run
	// made no call, and the session waits in backoff until HeldUntil
	// (rule wait_shared) before it asks again. HeldKey names the key and
	// HeldReason why it is held, as the shared_limit_wait event reports
	// them. A HeldUntil at or before the run's end waits 1 ms; one more
	// than a day away waits a day, then asks again.
	HeldUntil  time.Time
	HeldKey    string
	HeldReason string
}

// maxSharedHold is the longest a shared limit holds a run in one wait: a
// HeldUntil further away waits this long and asks again, so that no
// deadline leaves the years an Engine keeps (a limiter's clock or
// arithmetic gone wrong must not make one).
const maxSharedHold = 24 * time.Hour

// errNoAssistantMessage is the error of a run that returned without making
// a model call and without an error of its own.
var errNoAssistantMessage = errors.New("the run produced no assistant message")

// startRun asks the driver to start a run: the user's (prompt set) or a
// continuation.
func (e *Engine) startRun(prompt *transcript.Message) {
	e.run = &run{id: RunID(e.ticket()), continuation: prompt == nil}
	e.effect(Effect{Kind: StartRun, Run: e.run.id, Prompt: prompt, Context: e.ctx.share(0, len(e.ctx.msgs)), Model: e.model})
}

// current returns the run in flight when it is id, and ended (or not) as
// asked.
func (e *Engine) current(id RunID) *run {
	if r := e.run; r != nil && r.id == id {
		return r
	}
	return nil
}

// RunEvent is an event the agent emitted during run id. Events of a run that
// ended or was replaced are dropped, and so is a nil event.
func (e *Engine) RunEvent(at time.Time, id RunID, ev events.Event) []Effect {
	e.begin()
	r := e.current(id)
	if r == nil || r.ended || ev == nil {
		return e.end(at)
	}
	r.emitted = true
	ev = events.Clean(ev)
	// An event passed on as it came is emitted as the same interface
	// value: boxing it again would copy its message.
	switch v := ev.(type) {
	case events.MessageStart:
		if v.Message.Role == transcript.RoleAssistant {
			r.started = true
		}
		if bs := writableBlocks(v.Message.Content); !sameBlocks(bs, v.Message.Content) {
			v.Message.Content = bs
			ev = v
		}
	case events.MessageUpdate:
		if bs := writableBlocks(v.Message.Content); !sameBlocks(bs, v.Message.Content) {
			v.Message.Content = bs
			ev = v
		}
	case events.MessageEnd:
		if err := v.Message.CheckContent(); err != nil {
			e.refuse(at, r, v.Message, err)
			return e.end(at)
		}
		v.Message = e.complete(at, v.Message)
		if v.Message.Role == transcript.RoleAssistant {
			r.started = true
		}
		e.emit(v)
		e.onMessageEnd(at, r, v.Message)
		return e.end(at)
	case events.AgentEnd:
		r.ended = true
		if v.Messages == nil || !writable(v.Messages) {
			// The run's own list: it ended, so nothing changes it
			// any more.
			v.Messages = r.messages[:len(r.messages):len(r.messages)]
			ev = v
		}
	}
	e.emit(ev)
	return e.end(at)
}

// sameBlocks reports whether a and b are the same slice.
func sameBlocks(a, b []transcript.Block) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// complete fills in what the agent left out of a finished message: its ID
// (or a new one, when the history already has the agent's), its time, and
// for an assistant message the session's current model when the agent
// named neither provider nor model. String content is put in the form it
// reads back in (see transcript.Message.Canonical).
func (e *Engine) complete(at time.Time, m transcript.Message) transcript.Message {
	e.ctx.identify(&m)
	m = m.Canonical()
	if m.Timestamp == 0 {
		m.Timestamp = at.UnixMilli()
	}
	if m.Role == transcript.RoleAssistant && m.Provider == "" && m.Model == "" {
		m.Provider, m.Model = e.model.Provider, e.model.ID
	}
	return m
}

// onMessageEnd records a finished message; an assistant message steps the
// machine (a success ends the overflow episode and a retry chain).
func (e *Engine) onMessageEnd(at time.Time, r *run, m transcript.Message) {
	if r.messages == nil {
		r.messages = r.first[:0:1]
	}
	r.messages = append(r.messages, m)
	// The run's list keeps m as it is (an append never changes what it
	// holds, and the list goes out capped): the history entry and the
	// decision point at it there, rather than at a copy of their own (the
	// first message of a run is in the run itself).
	mp := &r.messages[len(r.messages)-1]
	prev := e.ctx.msgs
	e.recordMessage(mp)
	e.ctx.keepOutgrown(prev)
	if m.Role != transcript.RoleAssistant {
		return
	}
	e.calibrateUsage(mp)
	r.last = mp
	e.fire(&step{at: at, msg: r.last, facts: transitions.Facts{
		Signal: transitions.Replied, Error: m.IsError(), Aborted: m.StopReason == transcript.StopReasonAborted,
	}})
}

// RunReturned is the end of run id: the agent's Run returned. The run's
// last assistant message is decided on (agent_end), or the run could not
// start (start_failed). A run Abort cancelled decides nothing: the abort
// did.
func (e *Engine) RunReturned(at time.Time, id RunID, ret RunReturn) []Effect {
	e.begin()
	r := e.current(id)
	if r == nil {
		return e.end(at)
	}
	e.run = nil
	credential := wiretext.String(ret.Credential)
	ret.Err = wiretext.Error(ret.Err)
	if r.aborted {
		e.endRun(r)
	} else if !ret.HeldUntil.IsZero() && !r.emitted {
		hold := &sharedWait{key: wiretext.String(ret.HeldKey), reason: wiretext.String(ret.HeldReason)}
		wait := min(max(ceilMs(ret.HeldUntil.Sub(at)), time.Millisecond), maxSharedHold)
		e.fire(&step{at: at, hold: hold, continuation: r.continuation, facts: transitions.Facts{Signal: transitions.RunEnded, SharedHoldMs: wait.Milliseconds()}})
	} else if err := e.closeRun(at, r, ret); err != nil {
		e.fire(&step{at: at, err: err, continuation: r.continuation, facts: transitions.Facts{Signal: transitions.RunEnded}})
	} else {
		e.decideRun(at, r.last, ret.Draw, r.continuation, credential)
	}
	// The run no longer holds the array it was handed.
	e.ctx.outgrown = nil
	return e.end(at)
}

// closeRun turns how run r returned into its last assistant message: a
// panic, or an error the agent returned mid-run, becomes an error message
// that ends the run (a panic's is fatal: it is never retried); a run that
// ended keeps its own. It returns why the run could not start when it left
// no assistant message to decide on.
func (e *Engine) closeRun(at time.Time, r *run, ret RunReturn) error {
	switch {
	case ret.Panic != nil && !r.ended:
		e.failRun(at, r, &panicError{value: ret.Panic})
	case ret.Panic == nil && r.started && !r.ended:
		err := ret.Err
		if err == nil {
			err = errors.New("the agent stopped without ending the run")
		}
		e.failRun(at, r, err)
	default:
		// A panic after the run ended leaves its messages standing; the
		// driver logs it.
		e.endRun(r)
	}
	if r.last != nil {
		return nil
	}
	if !r.started && ret.Err != nil {
		return ret.Err
	}
	return errNoAssistantMessage
}

// endRun emits the agent_end that a run which reported something but
// returned without ending left out, so every agent_start has its end.
func (e *Engine) endRun(r *run) {
	if r.emitted && !r.ended {
		r.ended = true
		e.emit(events.AgentEnd{Messages: cloneMessages(r.messages)})
	}
}

// failRun reports err as the run's last message, an error from the
// session's model, and ends the run.
func (e *Engine) failRun(at time.Time, r *run, err error) {
	err = wiretext.Error(err) // a panic's value, say
	m := transcript.Message{ID: e.ctx.newID("msg"), Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError, ErrorMessage: err.Error(),
		Provider: e.model.Provider, Model: e.model.ID, Timestamp: at.UnixMilli(), Err: err}
	e.emit(events.MessageStart{Message: m})
	e.emit(events.MessageEnd{Message: m})
	e.onMessageEnd(at, r, m)
	r.ended = true
	e.emit(events.AgentEnd{Messages: cloneMessages(r.messages)})
}

// refuse ends run r on a message m of its agent that cannot be written
// (a block of an unknown type, tool call arguments that are not a JSON
// object): m is not kept, the run is cancelled and ends in an error
// message saying why, and the decision settles on that error, never
// retrying it. The run's later events are dropped.
func (e *Engine) refuse(at time.Time, r *run, m transcript.Message, why error) {
	r.started = true // the agent made a model call: its message is the proof
	e.effect(Effect{Kind: CancelRun, Run: r.id, Cause: errRefused})
	e.failRun(at, r, &invalidMessageError{id: m.ID, role: m.Role, err: why})
}

// errRefused is the cause of a run cancelled because its agent sent a
// message that cannot be written.
var errRefused = errors.New("the agent sent a message that cannot be written")

// invalidMessageError is the error of a run whose agent sent a message that
// cannot be written: it is never retried.
type invalidMessageError struct {
	id   string
	role transcript.Role
	err  error
}

func (i *invalidMessageError) Error() string {
	if i.id == "" {
		return fmt.Sprintf("policy: the agent's %s message cannot be written: %v", i.role, i.err)
	}
	return fmt.Sprintf("policy: the agent's %s message %q cannot be written: %v", i.role, i.id, i.err)
}

// writable reports whether every message of ms can be written.
func writable(ms []transcript.Message) bool {
	for _, m := range ms {
		if m.CheckContent() != nil {
			return false
		}
	}
	return true
}

// writableBlocks is bs without the blocks that cannot be written, for a
// message in progress (MessageStart, MessageUpdate), which is only shown:
// bs itself when all can be.
func writableBlocks(bs []transcript.Block) []transcript.Block {
	if (transcript.Message{Content: bs}).CheckContent() == nil {
		return bs
	}
	out := make([]transcript.Block, 0, len(bs))
	for _, b := range bs {
		if (transcript.Message{Content: []transcript.Block{b}}).CheckContent() == nil {
			out = append(out, b)
		}
	}
	return out
}

// panicError is the error of a run whose agent panicked: it is never
// retried.
type panicError struct{ value any }

func (p *panicError) Error() string { return fmt.Sprintf("the agent panicked: %v", p.value) }
