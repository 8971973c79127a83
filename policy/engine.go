package policy

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

// Engine is one session's recovery policy as a deterministic machine: the
// state machine, the retry counter, the overflow episode, the runtime
// context and the positions of history, the backoff in progress, the
// compaction in flight and the turn in flight. It is driven only by its
// inputs — the methods below, each given the time it happened and any
// random draw it needs — and answers each with the effects its driver must
// carry out, in order: start or cancel a run, arm or stop the timer, start
// or cancel a compaction, append to history, emit an event, finish the
// turn. It starts no goroutine, reads no clock, draws no random number and
// does no I/O, so the same inputs always give the same effects: one driver
// runs it in process (package session), another could run it in a durable
// workflow.
//
// The slice of effects an input returns is valid until the next input, or
// until Release, which a driver calls once it has carried them out so that
// their room serves the next input (of any engine). It is capped at its
// length (and so is an Append's Entries): a driver may append to it, which
// copies it. An Engine is not safe for concurrent use: a driver feeds it
// one input at a time.
type Engine struct {
	id    string
	model Model
	cfg   Config
	creds bool
	// resetWaited reports that the active chain waited for a usage
	// limit's reset (retry.waitForReset); resetWait, that the backoff in
	// progress does (its deadline is the reset). They sit beside creds,
	// in the room its alignment leaves.
	resetWaited, resetWait bool
	// recovery is Setup.Recovery, in the same room.
	recovery bool
	// overflowTokens is the provider's count of the latest overflow, until
	// a compaction or a call's usage supersedes it, negated when its text
	// gave no count (see overflowCount; read and written through overflow
	// and setOverflow only). It takes the rest of the word the four flags
	// above begin, so the count costs an Engine no room: a count over
	// math.MaxInt32 tokens is held there, which no window comes near.
	overflowTokens int32

	// machine holds the machine's state: the engine keeps no other copy.
	machine *fsm.Machine
	// attempt is the retry counter: 0 when no chain is active.
	attempt int
	// chain is when the active chain started, for its time budget.
	chain chain
	// fb is the model fallback chain, nil without the setting; model is
	// then the model in use, which may be a fallback model.
	fb *fallback

	ctx runtimeContext
	// calib is the token ratio the provider's latest count gave.
	calib calibration

	tickets uint64 // the last RunID, TimerID or CompactionID given out
	run     *run
	pending *step // a decision waiting for the credential store's answer
	wait    wait
	comp    *compaction
	turn    *turn

	// sc is what the input in progress works in (its effects, entries
	// and raised steps): taken from a pool at the input's begin, given
	// back at Release, so an engine that waits keeps none.
	sc *scratch
}

// Setup is what an Engine is made from.
type Setup struct {
	// SessionID is the session's identity.
	SessionID string
	// Model is the model the session talks to.
	Model Model
	// Config is the session's settings; it must be valid.
	Config Config
	// Credentials tells the engine a credential store answers usage
	// limits: it then asks (MarkUsageLimit) before deciding on one.
	Credentials bool
	// Recovery has the engine record in history what it does to recover
	// (transcript.EntryRecovery: each retry, a retry chain's end, a failed
	// automatic compaction, a failed turn), so that a history tells why the
	// session did what it did. Off, the history holds what it held before
	// recovery entries existed: messages, removals and compactions.
	Recovery bool
	// History is the session's history so far, oldest first: the engine
	// rebuilds its runtime context from it. It may be the history's tail:
	// see Before.
	History []transcript.Entry
	// Before is how many entries of the history precede History: 0 when
	// History is the whole history. A driver whose history is long may
	// hand over only its tail, from the latest compaction's first kept
	// entry on (that compaction's position less the entries from there to
	// it), since nothing before it can change the runtime context; the
	// engine then counts positions from Before. IDs are then new to the
	// tail and, for a history this version wrote, to all of it (see
	// Entry).
	Before int
}

// New makes an Engine, idle, from s. It fails on an invalid Config, a
// session ID or model whose text is not valid UTF-8, or a history holding
// an invalid entry.
func New(s Setup) (*Engine, error) {
	if s.SessionID == "" {
		return nil, errors.New("policy: empty session ID")
	}
	if err := validSetup(s); err != nil {
		return nil, err
	}
	if err := s.Config.Validate(); err != nil {
		return nil, err
	}
	if s.Before < 0 {
		return nil, fmt.Errorf("policy: negative Before %d", s.Before)
	}
	e := &Engine{id: s.SessionID, model: s.Model, cfg: s.Config, creds: s.Credentials, recovery: s.Recovery, machine: fsm.Default()}
	e.cfg.Fallback = cloneFallback(s.Config.Fallback)
	fb, err := newFallback(s.Model, e.cfg.Fallback)
	if err != nil {
		return nil, err
	}
	e.fb = fb
	if err := e.ctx.replay(s.Before, s.History); err != nil {
		return nil, err
	}
	e.calib = e.ctx.calibrated()
	return e, nil
}

// Status is everything a session reports of itself, read at once: its
// machine's state is one field of it.
type Status struct {
	// State is the machine's state.
	State states.State `json:"state"`
	// Attempt is the retry counter: 0 when no chain is active.
	Attempt int `json:"retryAttempt"`
	// Retrying reports whether a retry chain is active, from its
	// events.AutoRetryStart to its events.AutoRetryEnd (Attempt > 0).
	Retrying bool `json:"isRetrying"`
	// RetryEnabled and CompactionEnabled are the settings.
	RetryEnabled      bool `json:"autoRetryEnabled"`
	CompactionEnabled bool `json:"autoCompactionEnabled"`
	// MaxElapsedMs is the retry.maxElapsedMs setting and RetryStarted when
	// the chain's first failure was decided on, during a chain with a time
	// budget (zero otherwise): the budget runs out MaxElapsedMs after
	// RetryStarted, and no retry is scheduled to end later.
	MaxElapsedMs int64     `json:"maxElapsedMs,omitempty"`
	RetryStarted time.Time `json:"retryStartedAt,omitzero"`
	// Streaming reports whether a run is in flight.
	Streaming bool `json:"isStreaming"`
	// Compacting reports whether a compaction is in flight.
	Compacting bool `json:"isCompacting"`
	// MessageCount is the number of messages in the runtime context.
	MessageCount int `json:"messageCount"`
	// LastCompaction is the reason of the latest compaction (in the
	// history the session started on, or since), "" before any;
	// CompactionTokensBefore and CompactionTokensAfter are its
	// transcript.Compaction's TokensBefore and TokensAfter.
	LastCompaction         transcript.CompactionReason `json:"lastCompaction,omitempty"`
	CompactionTokensBefore int                         `json:"compactionTokensBefore,omitempty"`
	CompactionTokensAfter  int                         `json:"compactionTokensAfter,omitempty"`
	// SharedLimitKey, SharedLimitReason and SharedLimitUntil are set
	// while the session waits on a limit shared by the sessions of its
	// process (rule wait_shared): the key it holds (provider and
	// credential), why, and until when; empty otherwise.
	SharedLimitKey    string    `json:"sharedLimitKey,omitempty"`
	SharedLimitReason string    `json:"sharedLimitReason,omitempty"`
	SharedLimitUntil  time.Time `json:"sharedLimitUntil,omitzero"`
	// ResetAt is, while the backoff waits for a usage limit's reset
	// (retry.waitForReset), when the limit resets and the retry goes: the
	// backoff's deadline. Zero otherwise.
	ResetAt time.Time `json:"resetAt,omitzero"`
	// ActiveModel is, with the fallback setting, the ID of the model the
	// session's runs call: its own or a fallback model; "" without the
	// setting (the runs call the session's own). FallbackUntil is, on a
	// fallback model, when its cooldown ends: the first turn that starts
	// then goes back to the session's own model. Zero otherwise.
	ActiveModel   string    `json:"activeModel,omitempty"`
	FallbackUntil time.Time `json:"fallbackUntil,omitzero"`
}

// Status returns the engine's status.
func (e *Engine) Status() Status {
	var last compactionSize
	if l := e.ctx.last; l != nil {
		last = *l
	}
	st := Status{
		State:                  e.state(),
		Attempt:                e.attempt,
		Retrying:               e.attempt > 0,
		RetryEnabled:           e.cfg.Retry.Enabled,
		CompactionEnabled:      e.cfg.Compaction.Enabled,
		Streaming:              e.run != nil || e.pending != nil,
		Compacting:             e.comp != nil,
		MessageCount:           len(e.ctx.msgs),
		LastCompaction:         last.reason,
		CompactionTokensBefore: last.before,
		CompactionTokensAfter:  last.after,
		ResetAt:                e.resetAt(),
	}
	if sh := e.sharedWait(); sh != nil {
		st.SharedLimitKey, st.SharedLimitReason, st.SharedLimitUntil = sh.key, sh.reason, e.wait.end()
	}
	if budget := e.cfg.Retry.MaxElapsedMs; budget > 0 && e.attempt > 0 {
		st.MaxElapsedMs, st.RetryStarted = budget, e.chain.started()
	}
	if fb := e.fb; fb != nil {
		st.ActiveModel = e.model.ID
		if fb.at > 0 {
			st.FallbackUntil = time.Unix(0, fb.until).UTC()
		}
	}
	return st
}

// LastCompactionTruncated returns the tool results the latest compaction
// (the one Status reports) kept truncated, its transcript.Compaction's
// Truncated, nil before any compaction and when it truncated none. It is
// not part of Status, which stays comparable; the result is a copy.
func (e *Engine) LastCompactionTruncated() []transcript.Truncation {
	if l := e.ctx.last; l != nil {
		return slices.Clone(l.truncated)
	}
	return nil
}

// config returns the settings, a copy that shares nothing with the
// engine's (Snapshot's Config).
func (e *Engine) config() Config {
	c := e.cfg
	c.Fallback = cloneFallback(c.Fallback)
	return c
}

// Model returns the session's own model, the one it was made with, even
// while a fallback model answers its runs (Status's ActiveModel names
// that one, and each StartRun effect carries it).
func (e *Engine) Model() Model { return e.primary() }

// SessionID returns the session's identity.
func (e *Engine) SessionID() string { return e.id }

// Messages returns a copy of the runtime context: what the next model call
// sees. The slice is the caller's; the messages share their content
// blocks, usage and headers with the engine's, which must not be changed
// (session.Session.Messages copies them whole).
func (e *Engine) Messages() []transcript.Message { return cloneMessages(e.ctx.msgs) }

// SetRetryEnabled writes retry.enabled; it takes effect at the next
// decision.
func (e *Engine) SetRetryEnabled(on bool) { e.cfg.Retry.Enabled = on }

// SetCompactionEnabled writes compaction.enabled.
func (e *Engine) SetCompactionEnabled(on bool) { e.cfg.Compaction.Enabled = on }

// effectRoom is the room an input's effects start in: what nearly every
// input makes (a retry's decision makes five); the rare input that makes
// more grows it.
const effectRoom = 6

// entryRoom is the room an input's history entries start in: an input
// records one to three.
const entryRoom = 4

// scratch is what an input works in: its effects (out), the history
// entries it records (held for Appended until the driver releases them),
// the steps its actions raise, the first two with room to start in, and
// the facts the guards in progress read (take).
// The room past out and entries is always zero (a scratch comes from the
// pool cleared, and begin clears what a driver did not release), so an
// effect is written field by field where it lands (next).
type scratch struct {
	out       []Effect
	entries   []transcript.Entry
	raised    []step
	facts     transitions.Facts
	taking    bool
	effects   [effectRoom]Effect
	entryRoom [entryRoom]transcript.Entry
}

// scratches holds the scratches drivers gave back (Release), for the next
// input of any engine.
var scratches = sync.Pool{New: func() any {
	sc := new(scratch)
	sc.out, sc.entries = sc.effects[:0], sc.entryRoom[:0]
	return sc
}}

// work returns the engine's scratch, taking one from the pool when it has
// none.
func (e *Engine) work() *scratch {
	if e.sc == nil {
		e.sc = scratches.Get().(*scratch)
	}
	return e.sc
}

// begin starts the effects of an input.
func (e *Engine) begin() {
	sc := e.work()
	// Not released: the last input's effects and entries go now, so
	// that the scratch holds only this input's when it is released.
	clear(sc.out)
	clear(sc.entries)
	sc.out, sc.entries = sc.out[:0], sc.entries[:0]
	e.ctx.appendedN = 0
}

// end finishes an input: the steps still raised are taken, the turn
// settles when the session is at rest, and the effects go to the driver,
// the history's entries last.
func (e *Engine) end(at time.Time) []Effect {
	e.drain()
	e.advanceTurn(at)
	sc := e.sc
	if n := len(sc.entries); n > 0 {
		ef := e.next()
		ef.Kind, ef.Entries, ef.Await = Append, sc.entries[:n:n], e.comp != nil && e.comp.committing
	}
	// Capped at their length, so that a driver appending to them (its
	// own work list) copies them rather than write into the room, whose
	// part past them must stay zero: the engine writes there only the
	// fields of the effects it makes, and the room goes to the pool.
	return sc.out[:len(sc.out):len(sc.out)]
}

// Release tells the engine that the driver has carried out the effects of
// its last input, an Append's failure reported (Appended), and holds none
// of them: their room, and that of the entries appended, goes to the next
// input, of this engine or another, and an engine that waits keeps none.
// The effects must not be read after it. A driver that never calls it
// loses only that: each engine keeps the room of its last effects.
func (e *Engine) Release() {
	sc := e.sc
	if sc == nil {
		return
	}
	e.sc = nil
	// The scratch holds this input's effects and entries only (begin
	// cleared the ones before), or, where they outgrew their room, the
	// room full: the pool keeps no event, message or error.
	if cap(sc.out) == effectRoom {
		for i := range sc.out {
			sc.out[i].clear()
		}
	} else {
		clear(sc.effects[:])
		sc.out = sc.effects[:0]
	}
	if cap(sc.entries) == entryRoom {
		clear(sc.entries)
	} else {
		clear(sc.entryRoom[:])
		sc.entries = sc.entryRoom[:0]
	}
	sc.out, sc.entries, sc.raised = sc.out[:0], sc.entries[:0], nil
	// A take that an action's panic cut short left its mark: the next
	// input of any engine starts with none in progress.
	sc.taking = false
	scratches.Put(sc)
}

func (e *Engine) effect(ef Effect) { *e.next() = ef }

// clear zeroes ef. Most effects are an event to emit and nothing else:
// those have their two fields zeroed, rather than the whole Effect, whose
// every pointer costs a write barrier while the collector marks.
func (ef *Effect) clear() {
	m := &ef.Model
	if ef.Run == 0 && ef.Prompt == nil && ef.Context == nil && m.Provider == "" && m.ID == "" && m.ContextWindow == 0 && m.BaseURL == "" && ef.Cause == nil &&
		ef.Timer == 0 && ef.Deadline == (time.Time{}) && ef.Compaction == 0 && ef.Request == nil &&
		ef.Entries == nil && !ef.Await && ef.Hint == 0 && ef.Err == nil && ef.Result == nil {
		ef.Kind, ef.Event = 0, nil
		return
	}
	*ef = Effect{}
}

// next adds a zero effect to the input's effects and returns it, for the
// caller to set the fields its kind uses (see scratch): the effects an
// input makes most write only those fields rather than a whole Effect.
func (e *Engine) next() *Effect {
	sc := e.work()
	n := len(sc.out)
	if n == cap(sc.out) {
		sc.out = append(sc.out, Effect{})
	} else {
		sc.out = sc.out[:n+1]
	}
	return &sc.out[n]
}

// emit reports ev to the session's subscribers.
func (e *Engine) emit(ev events.Event) {
	ef := e.next()
	ef.Kind, ef.Event = Emit, ev
}

// ticket gives out the identity of a new run, timer or compaction.
func (e *Engine) ticket() uint64 {
	e.tickets++
	return e.tickets
}
