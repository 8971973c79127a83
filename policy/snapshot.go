package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/internal/owned"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

// snapshotVersion is the version of the Snapshot format this package
// writes, and the only one it reads.
const snapshotVersion = 1

// Snapshot is an Engine as a serializable value: what Restore needs,
// with the session's history, to go on in another process. It refers to
// history by position and holds no secret; the one message it copies is a
// prompt not yet in history (Prompt).
//
// Restore refuses a snapshot that breaks the engine's invariants (see
// Restore); decoded from JSON, a snapshot must hold every field Snapshot
// always writes (see UnmarshalJSON).
type Snapshot struct {
	// Version is the version of the format: 1, the one this package
	// writes and the only one Restore reads.
	Version   int    `json:"version"`
	SessionID string `json:"sessionId"`
	Config    Config `json:"config"`
	// State is the machine's state: idle, backoff, continuing or
	// compacting.
	State            states.State `json:"state"`
	Attempt          int          `json:"attempt"`
	EpisodeCompacted bool         `json:"episodeCompacted,omitempty"`
	// History is how many entries the session had written to its history.
	History int `json:"history"`
	// Deadline is when the backoff in progress ends (state backoff).
	Deadline *time.Time `json:"deadline,omitempty"`
	// ChainStart is when the active retry chain's first failure was
	// decided on (attempt 1 or more): its time budget counts from there,
	// in the restored engine too. Absent in a snapshot written before it
	// was recorded, which has no time budget.
	ChainStart *time.Time `json:"chainStart,omitempty"`
	// InFlight is what was in flight: "run" (the user's), "continuation",
	// "compaction", or empty when nothing was.
	InFlight string `json:"inFlight,omitempty"`
	// Aborted reports that Abort cancelled what was in flight, which had
	// not yet ended: the session is idle, waiting for it.
	Aborted bool `json:"aborted,omitempty"`
	// Compaction is the reason of the compaction in flight, and
	// CompactionCheck whether it was the check before a prompt's.
	Compaction      transcript.CompactionReason `json:"compaction,omitempty"`
	CompactionCheck bool                        `json:"compactionCheck,omitempty"`
	// Turn reports a user's turn in flight.
	Turn bool `json:"turn,omitempty"`
	// Prompt is the user's message of the turn in flight while it waits
	// for the check before it (CompactionCheck): it is in no history yet,
	// and the restored engine sends it once the check is over.
	Prompt *transcript.Message `json:"prompt,omitempty"`
	// Tickets is the last RunID, TimerID or CompactionID the engine gave
	// out: the restored engine numbers on after it, so that no identity of
	// the snapshotted engine is given out again. 0 in a snapshot written
	// before it was recorded.
	Tickets uint64 `json:"tickets,omitempty"`
	// TokenRatio is the session's token ratio: how many tokens the
	// provider counts for each token the chars/4 estimate gives, as its latest
	// count said (docs/session.md, "Calibration"). 0 before the provider
	// gave any count, and in a snapshot written before it was recorded,
	// when the restored engine takes it from the usage in its history.
	// Otherwise within [0.25, 16].
	TokenRatio float64 `json:"tokenRatio,omitempty"`
	// ResetWait reports that the backoff in progress waits for a usage
	// limit's reset (retry.waitForReset): Deadline is the reset. The
	// restored engine waits for it alike, to the same instant.
	ResetWait bool `json:"resetWait,omitempty"`
	// ResetWaited reports that the active chain waited for a reset: its
	// auto_retry_end says so.
	ResetWaited bool `json:"resetWaited,omitempty"`
	// OverflowTokens is the provider's count of the latest overflow, while
	// it stands (no compaction and no call's usage since): the size its
	// error text gave, or the model's window + 1 when it gave none
	// (OverflowCounted false), at most math.MaxInt32. 0 for none, and in
	// a snapshot written before it was recorded.
	OverflowTokens  int  `json:"overflowTokens,omitempty"`
	OverflowCounted bool `json:"overflowCounted,omitempty"`
	// ActiveModel is, on a fallback model (docs/policy.md §3.9), its ID,
	// one of Config.Fallback's models, and FallbackUntil when its
	// cooldown ends: the restored engine stays there until then. Both are
	// absent on the session's own model, and in a snapshot written before
	// they were recorded.
	ActiveModel   string     `json:"activeModel,omitempty"`
	FallbackUntil *time.Time `json:"fallbackUntil,omitempty"`
	// SharedWait reports that the backoff in progress waits out a limit
	// shared by the sessions of a process (rule wait_shared): Deadline is
	// the limit's, SharedLimitKey and SharedLimitReason what held it. Such
	// a backoff may wait with no retry chain active (attempt 0): it held
	// the user's run. The restored engine waits to the same instant, then
	// asks its driver's limiter again.
	SharedWait        bool   `json:"sharedWait,omitempty"`
	SharedLimitKey    string `json:"sharedLimitKey,omitempty"`
	SharedLimitReason string `json:"sharedLimitReason,omitempty"`
}

// What a Snapshot's InFlight names.
const (
	inFlightRun          = "run"
	inFlightContinuation = "continuation"
	inFlightCompaction   = "compaction"
)

// Snapshot returns the engine as a Snapshot. A manual compaction in flight is not
// part of it: its caller is in this process. Its Config is the engine's
// current settings (Setup's, as SetRetryEnabled and SetCompactionEnabled
// changed them), and Config and Prompt are copies: changing them changes
// nothing in the engine.
func (e *Engine) Snapshot() Snapshot {
	s := Snapshot{
		Version: snapshotVersion, SessionID: e.id, Config: e.config(), State: e.state(),
		Attempt: e.attempt, History: e.ctx.nextSeq, Turn: e.turn != nil,
		EpisodeCompacted: e.turn != nil && e.turn.episodeCompacted,
		Tickets:          e.tickets,
		TokenRatio:       float64(e.calib),
		ResetWaited:      e.resetWaited,
		OverflowTokens:   e.overflow().tokens,
		OverflowCounted:  e.overflow().counted,
	}
	if w := e.wait; w.pending() {
		d := w.end()
		s.Deadline = &d
		s.ResetWait = e.resetWait
		if sh := e.sharedWait(); sh != nil {
			s.SharedWait, s.SharedLimitKey, s.SharedLimitReason = true, sh.key, sh.reason
		}
	}
	if e.chain.start != 0 { // a retry chain is active
		c := e.chain.started()
		s.ChainStart = &c
	}
	if fb := e.fb; fb != nil && fb.at > 0 {
		u := time.Unix(0, fb.until).UTC()
		s.ActiveModel, s.FallbackUntil = e.model.ID, &u
	}
	switch {
	case e.pending != nil:
		// The decision waits on the credential store: the run is as good
		// as in flight, and is decided on again as interrupted.
		s.State, s.InFlight = states.Idle, inFlightRun
		if e.pending.continuation {
			s.State, s.InFlight = states.Continuing, inFlightContinuation
		}
	case e.run != nil:
		s.InFlight = inFlightRun
		if e.run.continuation {
			s.InFlight = inFlightContinuation
		}
		s.Aborted = e.run.aborted
	case e.comp != nil && e.comp.manual:
		// Its caller is in this process: the restored engine is at rest.
		s.State = states.Idle
	case e.comp != nil:
		s.InFlight = inFlightCompaction
		s.Compaction, s.CompactionCheck = e.comp.reason, e.comp.check
		// Abort leaves only a compaction past cancelling (its entry being
		// appended) in flight, and the machine idle.
		s.Aborted = s.State == states.Idle
	}
	if t := e.turn; t != nil && t.prompt != nil {
		p := owned.Message(*t.prompt)
		s.Prompt = &p
	}
	return s
}

// ErrSnapshot matches every error Restore returns for a snapshot it cannot
// restore.
var ErrSnapshot = errors.New("policy: cannot restore the snapshot")

// errInterrupted is the error of a run or compaction that was in flight
// when its snapshot was taken. Its text is on the wire and in histories as
// it was first written, "resumed" included.
var errInterrupted = errors.New("interrupted: the session was resumed from a snapshot")

// interruptedError marks the message of an interrupted run: the decision
// weighs it as a transient failure of its attempt.
type interruptedError struct{}

func (*interruptedError) Error() string { return errInterrupted.Error() }
func (*interruptedError) Unwrap() error { return errInterrupted }

// Restore rebuilds an Engine from a snapshot and the session's history
// (setup.History, which may hold entries written after the snapshot by a
// run in flight), at time at, and returns the effects that go on from
// there. An engine snapshotted with nothing in flight goes on exactly: a
// backoff fires at its original deadline (at once if that has passed) with
// the same attempt, and the chain's time budget counts from the same first
// failure (ChainStart). A run that was in flight is taken as interrupted: it goes
// through the decision as a transient failure of its attempt, so the
// chain's limits still hold (draw is the jitter's random number for that
// decision); one Abort had cancelled ends as aborted and decides nothing. A
// compaction in flight ends as failed; a prompt that waited for it (the
// check before a prompt) is then sent. A turn in flight settles as it
// would have, with no caller waiting.
//
// The snapshot's Config and session ID win over setup's. Restore refuses,
// with an error matching ErrSnapshot that names the field at fault, a
// snapshot of another version or of another session, one whose history
// does not match setup's, and one that breaks the engine's invariants (see
// docs/session.md, "Snapshots"): among them an invalid config, a state a
// snapshot is never taken in, an attempt that does not go with the state
// (0 when idle or compacting, at least 1 in backoff, never above
// retry.maxRetries), a chain start without a chain or, with a time budget,
// a chain without its start, a deadline without a backoff, a check before a prompt
// without its prompt, and identities with no room left to number on.
func Restore(setup Setup, snap Snapshot, at time.Time, draw float64) (*Engine, []Effect, error) {
	if err := snap.check(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	if setup.SessionID != "" && setup.SessionID != snap.SessionID {
		return nil, nil, fmt.Errorf("%w: it is session %q's, not %q's", ErrSnapshot, snap.SessionID, setup.SessionID)
	}
	if setup.Before < 0 {
		return nil, nil, fmt.Errorf("%w: negative Before %d", ErrSnapshot, setup.Before)
	}
	if snap.History > setup.Before+len(setup.History) {
		return nil, nil, fmt.Errorf("%w: history: it counts %d history entries, the history has %d", ErrSnapshot, snap.History, setup.Before+len(setup.History))
	}
	if snap.History < setup.Before+len(setup.History) && (snap.InFlight == "" || snap.InFlight == inFlightCompaction) {
		return nil, nil, fmt.Errorf("%w: history: the history moved on after it (%d entries, the snapshot counts %d)", ErrSnapshot, setup.Before+len(setup.History), snap.History)
	}
	// What a run in flight wrote after the snapshot is its messages (and a
	// removal its decision made): a compaction there is the history of a
	// session that went on past the snapshot.
	for i, en := range setup.History[max(0, snap.History-setup.Before):] {
		if en.Type == transcript.EntryCompaction {
			return nil, nil, fmt.Errorf("%w: history: the history moved on after it (entry %d, after the %d it counts, is a compaction)", ErrSnapshot, max(snap.History, setup.Before)+i+1, snap.History)
		}
	}
	setup.SessionID, setup.Config = snap.SessionID, snap.Config
	e, err := New(setup)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	if p := snap.Prompt; p != nil {
		if e.ctx.taken(p.ID) {
			return nil, nil, fmt.Errorf("%w: prompt: id %q is already in the history", ErrSnapshot, p.ID)
		}
	}
	if e.machine, err = fsm.DefaultIn(snap.State); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	e.attempt = snap.Attempt
	if snap.ChainStart != nil {
		e.chain = chainFrom(*snap.ChainStart)
	}
	e.resetWaited = snap.ResetWaited
	if snap.ActiveModel != "" {
		i := e.fb.index(snap.ActiveModel)
		if i <= 0 {
			return nil, nil, fmt.Errorf("%w: activeModel: %q is not one of fallback.models", ErrSnapshot, snap.ActiveModel)
		}
		e.fb.at, e.fb.from, e.fb.until = i, i, snap.FallbackUntil.UnixNano()
		e.model = e.fb.models[i]
	}
	e.tickets = snap.Tickets
	if snap.TokenRatio != 0 {
		e.calib = calibration(snap.TokenRatio)
	}
	if snap.OverflowTokens > 0 {
		e.setOverflow(overflowCount{tokens: snap.OverflowTokens, counted: snap.OverflowCounted})
	}
	e.begin()
	if snap.Turn {
		e.turn = &turn{episodeCompacted: snap.EpisodeCompacted}
		if snap.Aborted {
			e.turn.err = ErrAborted
		}
		if p := snap.Prompt; p != nil {
			m := *p
			e.turn.prompt = &m
			// The prompt's ID was given out before the snapshot: new IDs
			// count on after it.
			e.ctx.ids = max(e.ctx.ids, idNumber(m.ID))
		}
	}
	switch snap.InFlight {
	case inFlightRun, inFlightContinuation:
		r := &run{id: RunID(e.ticket()), continuation: snap.InFlight == inFlightContinuation, emitted: true}
		if snap.Aborted {
			// Abort had cancelled it: it ends and decides nothing.
			e.endRun(r)
			break
		}
		e.failRun(at, r, &interruptedError{})
		e.decide(at, r.last, transitions.RunEnded, draw, r.continuation)
	case inFlightCompaction:
		c := &compaction{reason: snap.Compaction, check: snap.CompactionCheck}
		c.willRetry = c.reason == transcript.ReasonOverflow && !c.check
		e.compactionFailed(at, c, errInterrupted)
	}
	if snap.Deadline != nil {
		e.startWait(*snap.Deadline)
		e.resetWait = snap.ResetWait
		if snap.SharedWait {
			e.setShared(&sharedWait{key: snap.SharedLimitKey, reason: snap.SharedLimitReason})
		}
	}
	return e, e.end(at), nil
}

// nanoTime reports whether t is a time the engine keeps exactly, as Unix
// nanoseconds: neither the Unix epoch itself (which stands for none) nor
// out of int64's range.
func nanoTime(t time.Time) bool {
	lo, hi := time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)
	return !t.Before(lo) && !t.After(hi) && t.UnixNano() != 0
}

// maxTickets bounds a snapshot's Tickets: a counter above it would wrap to
// 0, the identity of nothing, long before a session could use it up.
const maxTickets = 1 << 53

// check reports the first invariant of the engine s breaks, naming its
// field. The states an input leaves the engine in are idle, backoff,
// continuing and compacting (classifying, exhausted and cancelled last no
// longer than the input that enters them); in each, what may be in flight,
// the retry counter and the rest are bound as below.
func (s Snapshot) check() error {
	if s.Version != snapshotVersion {
		return fmt.Errorf("version %d (this version reads %d)", s.Version, snapshotVersion)
	}
	if s.SessionID == "" {
		return errors.New("sessionId: empty")
	}
	if err := s.Config.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if s.History < 0 {
		return fmt.Errorf("history: negative %d", s.History)
	}
	if !validRatio(s.TokenRatio) {
		return fmt.Errorf("tokenRatio: %v is outside [%v, %v] (0 for none)", s.TokenRatio, minTokenRatio, maxTokenRatio)
	}
	if s.OverflowTokens < 0 || s.OverflowTokens > math.MaxInt32 {
		return fmt.Errorf("overflowTokens: %d is outside [0, %d]", s.OverflowTokens, math.MaxInt32)
	}
	if s.Tickets > maxTickets {
		return fmt.Errorf("tickets: %d leaves no room to number runs, timers and compactions on (at most %d)", s.Tickets, uint64(maxTickets))
	}
	switch s.State {
	case states.Idle, states.Backoff, states.Continuing, states.Compacting:
	default:
		return fmt.Errorf("state: %q is not one a snapshot is taken in (idle, backoff, continuing or compacting)", s.State)
	}
	if s.InFlight != "" && s.InFlight != inFlightRun && s.InFlight != inFlightContinuation && s.InFlight != inFlightCompaction {
		return fmt.Errorf("inFlight: unknown %q (want run, continuation, compaction or none)", s.InFlight)
	}
	if s.Aborted && (s.State != states.Idle || s.InFlight == "") {
		return fmt.Errorf("aborted: in state %q with %q in flight (Abort leaves the session idle, waiting for what it cancelled)", s.State, s.InFlight)
	}
	if s.State == states.Idle && s.InFlight != "" && s.InFlight != inFlightRun && !s.Aborted {
		// Only Abort leaves a continuation or a compaction in flight while
		// the machine is idle.
		return fmt.Errorf("inFlight: %q in flight in state idle, not aborted", s.InFlight)
	}
	want := map[states.State]string{
		states.Backoff: "", states.Continuing: inFlightContinuation, states.Compacting: inFlightCompaction,
	}
	if s.State != states.Idle && s.InFlight != want[s.State] {
		return fmt.Errorf("inFlight: %q in flight in state %q", s.InFlight, s.State)
	}
	if s.State == states.Backoff && s.Deadline == nil {
		return errors.New(`deadline: missing in state "backoff" (a backoff waits until its deadline)`)
	}
	if s.State != states.Backoff && s.Deadline != nil {
		return fmt.Errorf("deadline: set in state %q (a deadline is a backoff's)", s.State)
	}
	if s.Attempt < 0 {
		return fmt.Errorf("attempt: negative %d", s.Attempt)
	}
	if s.Config.Retry.MaxRetries >= 0 && s.Attempt > s.Config.Retry.MaxRetries {
		return fmt.Errorf("attempt: %d is above retry.maxRetries %d", s.Attempt, s.Config.Retry.MaxRetries)
	}

	if s.Attempt != 0 && (s.State == states.Idle || s.State == states.Compacting) {
		return fmt.Errorf("attempt: %d in state %q (a retry chain is active only in backoff or continuing)", s.Attempt, s.State)
	}
	if s.Attempt == 0 && s.State == states.Backoff && !s.SharedWait {
		return errors.New("attempt: 0 in state backoff (a backoff waits for a retry, attempt 1 or more, or out a shared limit)")
	}
	if s.SharedWait && s.State != states.Backoff {
		return fmt.Errorf("sharedWait: set in state %q (a wait on a shared limit is a backoff)", s.State)
	}
	if s.SharedWait && !s.Turn {
		return errors.New("sharedWait: set with no turn in flight (a shared limit holds a turn's run)")
	}
	if s.SharedWait && s.ResetWait {
		return errors.New("sharedWait: set with resetWait (a backoff waits for one deadline)")
	}
	if !utf8.ValidString(s.SharedLimitKey) || !utf8.ValidString(s.SharedLimitReason) {
		return errors.New("sharedLimitKey, sharedLimitReason: not valid UTF-8")
	}
	if !s.SharedWait && (s.SharedLimitKey != "" || s.SharedLimitReason != "") {
		return errors.New("sharedLimitKey, sharedLimitReason: set with no wait on a shared limit (sharedWait)")
	}
	if s.ChainStart != nil && s.ChainStart.IsZero() {
		return errors.New("chainStart: the zero time (a chain starts at its first failure's time)")
	}
	if s.ChainStart != nil && !nanoTime(*s.ChainStart) {
		return fmt.Errorf("chainStart: %s is outside the years 1678 to 2262, which the engine keeps", s.ChainStart.UTC().Format(time.RFC3339))
	}
	if s.Deadline != nil && !nanoTime(*s.Deadline) {
		return fmt.Errorf("deadline: %s is outside the years 1678 to 2262, which the engine keeps", s.Deadline.UTC().Format(time.RFC3339))
	}
	if s.ChainStart != nil && s.Attempt == 0 {
		return errors.New("chainStart: set with no retry chain active (attempt 0)")
	}
	if s.ChainStart == nil && s.Attempt > 0 && s.Config.Retry.MaxElapsedMs > 0 {
		return errors.New("chainStart: missing while a retry chain with a time budget (retry.maxElapsedMs) is active: the budget would have nothing to count from")
	}
	if s.ResetWait && s.State != states.Backoff {
		return fmt.Errorf("resetWait: set in state %q (a wait for a reset is a backoff)", s.State)
	}
	if s.ResetWait && !s.ResetWaited {
		return errors.New("resetWaited: clear while the backoff waits for a reset (the chain waits for one)")
	}
	if s.ResetWaited && s.Attempt == 0 {
		return errors.New("resetWaited: set with no retry chain active (attempt 0)")
	}
	if s.ActiveModel != "" && s.Config.Fallback == nil {
		return fmt.Errorf("activeModel: %q with no fallback setting", s.ActiveModel)
	}
	if s.ActiveModel != "" && !slices.ContainsFunc(s.Config.Fallback.Models, func(m FallbackModel) bool { return m.ID == s.ActiveModel }) {
		return fmt.Errorf("activeModel: %q is not one of fallback.models", s.ActiveModel)
	}
	if (s.ActiveModel == "") != (s.FallbackUntil == nil) {
		return errors.New("fallbackUntil: set without activeModel, or activeModel without it (a fallback model has its cooldown)")
	}
	if s.FallbackUntil != nil && !nanoTime(*s.FallbackUntil) {
		return fmt.Errorf("fallbackUntil: %s is outside the years 1678 to 2262, which the engine keeps", s.FallbackUntil.UTC().Format(time.RFC3339))
	}
	if s.EpisodeCompacted && !s.Turn {
		return errors.New("episodeCompacted: set with no turn in flight (an overflow episode is a turn's)")
	}
	if s.InFlight != inFlightCompaction && (s.Compaction != "" || s.CompactionCheck) {
		return fmt.Errorf("compaction: reason %q (check %v) with no compaction in flight", s.Compaction, s.CompactionCheck)
	}
	if s.InFlight == inFlightCompaction && s.Compaction != transcript.ReasonOverflow && s.Compaction != transcript.ReasonThreshold {
		return fmt.Errorf("compaction: reason %q of an automatic compaction (want overflow or threshold)", s.Compaction)
	}
	// An overflow's recovery marks its episode; a threshold compaction
	// follows a success, which clears it, and the check before a prompt
	// follows Prompt, which clears it too. Abort leaves the episode as it
	// was.
	if s.InFlight == inFlightCompaction && !s.Aborted && s.EpisodeCompacted != (s.Compaction == transcript.ReasonOverflow && !s.CompactionCheck) {
		return fmt.Errorf("episodeCompacted: %v during a %s compaction (check %v)", s.EpisodeCompacted, s.Compaction, s.CompactionCheck)
	}
	return s.checkPrompt()
}

// checkPrompt checks the turn and its prompt: the check before a prompt
// holds the turn's prompt, which nothing else does.
func (s Snapshot) checkPrompt() error {
	waiting := s.CompactionCheck && !s.Aborted // Abort drops the prompt
	if s.CompactionCheck && !s.Turn {
		return errors.New("turn: none while the check before a prompt is in flight")
	}
	if waiting && s.Prompt == nil {
		return errors.New("prompt: missing while the check before it is in flight: the turn would go on without it")
	}
	if !waiting && s.Prompt != nil {
		return errors.New("prompt: set with no check before it in flight")
	}
	p := s.Prompt
	if p == nil {
		return nil
	}
	if p.Role != transcript.RoleUser {
		return fmt.Errorf("prompt: role %q (want user)", p.Role)
	}
	if p.ID == "" || !utf8.ValidString(p.ID) {
		return fmt.Errorf("prompt: id %q is not a message ID", p.ID)
	}
	if err := p.CheckContent(); err != nil {
		return fmt.Errorf("prompt: %w", err)
	}
	return nil
}

// UnmarshalJSON reads a snapshot as Snapshot writes it. Every field it
// always writes (version, sessionId, config and each of its settings,
// state, attempt, history) must be there, under that key, and not null: a
// snapshot cut short is refused rather than read with zero values (a
// config left out would turn retry and compaction off). Its errors match
// ErrSnapshot and name the field. What it reads, Restore still checks.
func (s *Snapshot) UnmarshalJSON(data []byte) error {
	type plain Snapshot
	if err := requireFields(data, "", reflect.TypeFor[plain]()); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	*s = Snapshot(p)
	return nil
}

// requireFields checks that data, the JSON of a struct of type t, holds
// every field of t that is written even when zero (no omitempty), not
// null, and so on down the fields that are structs themselves. prefix is
// the dotted path of t's fields.
func requireFields(data []byte, prefix string, t reflect.Type) error {
	what := "the snapshot"
	if prefix != "" {
		what = strings.TrimSuffix(prefix, ".")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return fmt.Errorf("%s: not a JSON object", what)
	}
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || strings.Contains(opts, "omitempty") {
			continue
		}
		raw, ok := obj[name]
		switch {
		case !ok:
			return fmt.Errorf("%s%s: missing", prefix, name)
		case string(raw) == "null":
			return fmt.Errorf("%s%s: null", prefix, name)
		}
		if f.Type.Kind() == reflect.Struct {
			if err := requireFields(raw, prefix+name+".", f.Type); err != nil {
				return err
			}
		}
	}
	return nil
}
