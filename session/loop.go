package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// loopState is everything the loop owns: only the goroutine running the
// loop's queue reads or writes it.
type loopState struct {
	machine *fsm.Machine
	cfg     Config
	// attempt is the retry counter: 0 when no chain is active.
	attempt int
	// runtime is the runtime context, the messages the next call sees.
	runtime []Message
	// seq orders history: the position of each message and compaction
	// (by ID) and of the latest compaction, for the stale rule. Its keys
	// are the IDs taken.
	seq           map[string]int
	nextSeq       int
	compactionSeq int
	// episodeCompacted marks an overflow episode already compacted once.
	episodeCompacted bool

	run *runState
	// backoff is the identity of the retry wait in progress (0: none),
	// deadline when it ends, and timer the session's one timer, reset for
	// each wait. A firing is checked against the deadline: one left over
	// from an earlier, cancelled wait comes before the deadline of the wait
	// in progress, and is ignored.
	backoff  int
	deadline time.Time
	timer    *time.Timer
	job      *compactionJob
	turn     *turnState
	quiet    []chan struct{}
	ids      int
	// renamed maps an agent's message ID that identify replaced to its
	// replacement.
	renamed map[string]string
}

// runState is the run in flight.
type runState struct {
	id           int
	cancel       context.CancelCauseFunc
	continuation bool
	// emitted: the agent reported something (agent_start or later).
	emitted bool
	// started: the run made a model call: an assistant message began.
	// A run that ends without one could not start.
	started bool
	ended   bool
	// aborted: Abort (or the Prompt's context) cancelled the run. Its
	// last events are reported but decide nothing: no retry, compaction
	// or continuation can come of them.
	aborted  bool
	messages []Message
	last     *Message // the run's last assistant message
}

// compactionJob is the compaction in flight.
type compactionJob struct {
	id        int
	cancel    context.CancelCauseFunc
	reason    CompactionReason
	willRetry bool
	// manual jobs have a reply and emit no auto_compaction events.
	manual func(CompactionResult, error)
	// check: the compaction of the check before a prompt, which never
	// fails the turn.
	check  bool
	cut    []Message
	kept   []Message
	before int
}

// turnState is the user's turn in flight.
type turnState struct {
	reply chan error
	err   error
	// prompt is the user's message, waiting for the check before a
	// prompt to finish; nil once sent.
	prompt *Message
}

var errCompactionAborted = errors.New("compaction aborted")

// newID returns a new ID, kind-N, that no entry of the history has. N
// counts on from the highest number ending an ID of the history the
// session started on (restore), skipping any ID already taken, so IDs are
// unique across every session that wrote the history and read in the
// order they were made. A counter rather than random IDs: a history has
// one writer at a time (FileHistory locks its file), so the history read
// at the start holds every ID used before, and a counter keeps IDs short,
// ordered and the same from one run of a test to the next.
func (s *Session) newID(kind string) string {
	l := &s.loop
	for {
		l.ids++
		if id := kind + "-" + strconv.Itoa(l.ids); !s.taken(id) {
			return id
		}
	}
}

func nowMs() int64 { return time.Now().UnixMilli() }

func summaryMessage(e Entry) Message {
	return Message{ID: e.ID, Role: RoleSummary, Text: e.Compaction.Summary, Timestamp: e.Timestamp}
}

// record adds e to history and notes its position. On an error nothing was
// added.
func (s *Session) record(e Entry) error {
	l := &s.loop
	if err := s.history.Append(e); err != nil {
		return err
	}
	l.nextSeq++
	switch e.Type {
	case EntryCompaction:
		l.compactionSeq = l.nextSeq
		l.seq[e.ID] = l.nextSeq
	case EntryMessage:
		l.seq[e.ID] = l.nextSeq
	}
	return nil
}

// recordMessage adds a message to history. A failure is logged and fails
// the turn in flight; the message stays in the runtime context.
func (s *Session) recordMessage(m *Message) {
	if err := s.record(Entry{Type: EntryMessage, ID: m.ID, Timestamp: m.Timestamp, Message: m}); err != nil {
		s.logger.Error("session: history append failed", "error", err)
		s.failTurn(err)
	}
}

// emit sends ev to the subscribers.
func (s *Session) emit(ev Event) { s.subs.emit(ev) }

// step takes the rule that applies for f and reports the state change.
func (s *Session) step(f transitions.Facts) (fsm.Transition, bool) {
	tr, ok := s.take(f)
	if ok {
		s.emit(stateChangeEvent(tr))
	}
	return tr, ok
}

// take takes the rule that applies for f without reporting it: the caller
// emits its state_change.
func (s *Session) take(f transitions.Facts) (fsm.Transition, bool) {
	tr, err := s.loop.machine.Step(context.Background(), f)
	if err != nil {
		if !errors.Is(err, fsm.ErrNoRule) {
			s.logger.Error("session: machine refused a transition", "error", err)
		}
		return fsm.Transition{}, false
	}
	return tr, true
}

// stateChanges holds one StateChange per edge of the table, already in an
// Event interface, so reporting a transition allocates nothing.
var stateChanges = func() map[fsm.Transition]Event {
	out := map[fsm.Transition]Event{}
	for _, r := range transitions.Table() {
		for _, from := range r.From {
			tr := fsm.Transition{From: from, To: r.To, Event: r.Event, Guard: r.Guard.Name}
			out[tr] = StateChange{From: from, To: r.To, Event: r.Event}
		}
	}
	return out
}()

func stateChangeEvent(tr fsm.Transition) Event {
	if ev, ok := stateChanges[tr]; ok {
		return ev
	}
	return StateChange{From: tr.From, To: tr.To, Event: tr.Event}
}

// passThrough takes the reset from exhausted or cancelled to idle.
func (s *Session) passThrough() {
	if s.loop.machine.State().PassThrough() {
		s.step(transitions.Facts{})
	}
}

// failTurn records why the turn in flight failed; the first reason wins.
func (s *Session) failTurn(err error) {
	if t := s.loop.turn; t != nil && t.err == nil {
		t.err = err
	}
}

// startTurn begins a user's turn: the check before a prompt, then the run.
// It reports false, doing nothing, when the session is busy.
func (s *Session) startTurn(text string, reply chan error) bool {
	l := &s.loop
	if l.turn != nil || l.run != nil || l.job != nil || l.machine.State() != states.Idle {
		return false
	}
	msg := &Message{ID: s.newID("user"), Role: RoleUser, Text: text, Timestamp: nowMs()}
	l.turn = &turnState{reply: reply, prompt: msg}
	l.episodeCompacted = false
	// The check before a prompt (§4.6): from idle, the table compacts or
	// does nothing.
	if last := s.lastAssistant(); last != nil {
		s.decide(last, transitions.PromptCheck)
	}
	return true
}

// sendPrompt starts the user's run once the check before it is done.
func (s *Session) sendPrompt() {
	l := &s.loop
	msg := l.turn.prompt
	l.turn.prompt = nil
	l.runtime = append(l.runtime, *msg)
	s.recordMessage(msg)
	s.startRun(msg)
}

// lastAssistant is the last assistant message of the runtime context.
func (s *Session) lastAssistant() *Message {
	rt := s.loop.runtime
	for i := len(rt) - 1; i >= 0; i-- {
		if rt[i].Role == RoleAssistant {
			m := rt[i]
			return &m
		}
	}
	return nil
}

// startRun starts a run on its own goroutine: the user's (prompt set) or a
// continuation. Its events come back to the loop through post. A panic in
// the agent is recovered and becomes the run's error.
func (s *Session) startRun(prompt *Message) {
	l := &s.loop
	l.ids++
	id := l.ids
	ctx, cancel := context.WithCancelCause(context.Background())
	l.run = &runState{id: id, cancel: cancel, continuation: prompt == nil}
	req := RunRequest{SessionID: s.id, Prompt: prompt, Context: cloneMessages(l.runtime), Model: s.model}
	if s.creds != nil && s.model.Provider != "" {
		if c, ok := s.creds.Current(s.model.Provider, s.id); ok {
			req.Credential = &c
		}
	}
	go func() {
		emit := func(ev Event) { s.post(func() { s.onAgentEvent(id, ev) }) }
		err := s.runAgent(ctx, req, emit)
		cancel(nil)
		s.post(func() { s.onRunDone(id, err) })
	}()
}

// runAgent calls the agent, turning a panic into a *panicError.
func (s *Session) runAgent(ctx context.Context, req RunRequest, emit func(Event)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = recovered("agent", r, s.logger)
		}
	}()
	return s.agent.Run(ctx, req, emit)
}

// onAgentEvent handles one event of the run id.
func (s *Session) onAgentEvent(id int, ev Event) {
	l := &s.loop
	r := l.run
	if r == nil || r.id != id || r.ended {
		return // a run that already ended or was replaced
	}
	r.emitted = true
	switch e := ev.(type) {
	case MessageStart:
		if e.Message.Role == RoleAssistant {
			r.started = true
		}
	case MessageEnd:
		e.Message = s.complete(e.Message)
		if e.Message.Role == RoleAssistant {
			r.started = true
		}
		s.emit(e)
		s.onMessageEnd(r, e.Message)
		return
	case AgentEnd:
		r.ended = true
		if e.Messages == nil {
			e.Messages = cloneMessages(r.messages)
		}
		ev = e
	}
	s.emit(ev)
}

// complete fills in what the agent left out of a finished message: its ID
// (or a new one, when the history already has the agent's),
// its time, and for an assistant message the session's current model when
// the agent named neither provider nor model.
func (s *Session) complete(m Message) Message {
	s.identify(&m)
	if m.Timestamp == 0 {
		m.Timestamp = nowMs()
	}
	if m.Role == RoleAssistant && m.Provider == "" && m.Model == "" {
		m.Provider, m.Model = s.model.Provider, s.model.ID
	}
	return m
}

// onMessageEnd records a finished message and ends a retry chain at the
// first success after a retry.
func (s *Session) onMessageEnd(r *runState, m Message) {
	l := &s.loop
	r.messages = append(r.messages, m)
	l.runtime = append(l.runtime, m)
	s.recordMessage(&m)
	if m.Role != RoleAssistant {
		return
	}
	r.last = &m
	if !m.IsError() {
		l.episodeCompacted = false
	}
	if m.succeeded() && l.attempt > 0 && !r.aborted {
		s.emit(AutoRetryEnd{Success: true, Attempt: l.attempt})
		l.attempt = 0
	}
}

// errNoAssistantMessage is the error of a run that returned without making
// a model call and without an error of its own.
var errNoAssistantMessage = errors.New("the run produced no assistant message")

// onRunDone handles the end of run id: the decision at agent_end, or a run
// that could not start. A run Abort cancelled decides nothing.
func (s *Session) onRunDone(id int, err error) {
	l := &s.loop
	r := l.run
	if r == nil || r.id != id {
		return
	}
	l.run = nil
	var panicked *panicError
	switch {
	case r.aborted:
		s.endRun(r)
		return
	case errors.As(err, &panicked):
		// The panic is the run's error: a fatal message the decision
		// settles on, never retries.
		s.failRun(r, err)
	case !r.started:
		s.endRun(r)
		if err == nil {
			err = errNoAssistantMessage
		}
		s.startFailed(r, err)
		return
	case !r.ended:
		// The agent failed mid-run without ending it: report its error as
		// the run's last message and end the run for it.
		if err == nil {
			err = errors.New("the agent stopped without ending the run")
		}
		s.failRun(r, err)
	case r.last == nil:
		// An assistant message began and never ended.
		s.startFailed(r, errNoAssistantMessage)
		return
	}
	s.decide(r.last, transitions.RunEnded)
}

// endRun emits the agent_end that a run which reported something but
// returned without ending left out, so every agent_start has its end.
func (s *Session) endRun(r *runState) {
	if r.emitted && !r.ended {
		r.ended = true
		s.emit(AgentEnd{Messages: cloneMessages(r.messages)})
	}
}

// failRun reports err as the run's last message, an error from the
// session's model, and ends the run if the agent did not.
func (s *Session) failRun(r *runState, err error) {
	m := Message{ID: s.newID("msg"), Role: RoleAssistant, StopReason: classify.StopReasonError, ErrorMessage: err.Error(),
		Provider: s.model.Provider, Model: s.model.ID, Timestamp: nowMs(), Err: err}
	s.emit(MessageStart{Message: m})
	s.emit(MessageEnd{Message: m})
	s.onMessageEnd(r, m)
	if !r.ended {
		r.ended = true
		s.emit(AgentEnd{Messages: cloneMessages(r.messages)})
	}
}

// startFailed ends a run that could not start.
func (s *Session) startFailed(r *runState, err error) {
	s.failTurn(fmt.Errorf("%w: %w", ErrStartFailed, err))
	if !r.continuation {
		return
	}
	s.endChain(err.Error())
	s.step(transitions.Facts{Signal: transitions.NotStarted})
}

// facts gathers what the guards read about m. For the decision after a run
// on a usage limit it first asks the credential store to block the key the
// session used, and notes whether it switched to another: the switch comes
// before the rule that ends a chain on a retry hint above the cap.
func (s *Session) facts(m *Message, sig transitions.Signal) (transitions.Facts, verdict) {
	l := &s.loop
	f := transitions.Facts{
		Signal:            sig,
		RetryEnabled:      l.cfg.Retry.Enabled,
		Attempt:           l.attempt,
		MaxRetries:        l.cfg.Retry.MaxRetries,
		CompactionEnabled: l.cfg.Compaction.Enabled,
		EpisodeCompacted:  l.episodeCompacted,
		ContextWindow:     s.model.ContextWindow,
		ReserveTokens:     l.cfg.Compaction.ReserveTokens,
	}
	if m == nil {
		return f, verdict{}
	}
	var v verdict
	if _, ok := m.Err.(*panicError); ok {
		v.Result = classify.Result{Class: classify.Fatal}
	} else {
		v.Result = l.cfg.Retry.Rules.Classify(m.classifyMessage(s.model.ContextWindow), time.Now())
	}
	f.Class = v.Class
	f.Error = m.IsError()
	f.Aborted = m.StopReason == classify.StopReasonAborted
	f.HintOverCap = hintOverCap(l.cfg.Retry, v.RetryAfter, v.HasRetryAfter)
	f.SameModel = m.Provider == s.model.Provider && m.Model == s.model.ID
	f.Stale = l.compactionSeq > 0 && l.seq[m.ID] <= l.compactionSeq
	f.Tokens = contextTokens(m.Usage)
	if sig == transitions.RunEnded && v.UsageLimit && s.creds != nil && s.model.Provider != "" {
		var hint time.Duration
		if v.HasRetryAfter {
			hint = v.RetryAfter
		}
		v.switched = s.creds.MarkUsageLimitReached(s.model.Provider, s.id, hint, s.model.BaseURL)
		f.CredentialSwitched = v.switched
	}
	return f, v
}

// verdict is what the decision learnt about a message besides its facts.
type verdict struct {
	classify.Result
	// switched: the credential store moved the session to a free
	// credential after a usage limit.
	switched bool
}

// decide is the decision at agent_end (policy §1), and the check before a
// prompt (§4.6), on the message m.
func (s *Session) decide(m *Message, sig transitions.Signal) {
	l := &s.loop
	f, v := s.facts(m, sig)
	if sig == transitions.RunEnded {
		if _, ok := s.step(f); !ok { // idle or continuing → classifying
			return
		}
	}
	tr, ok := s.take(f)
	if !ok {
		return // the check before a prompt found nothing to do
	}
	var text string
	if m != nil {
		text = m.ErrorMessage
	}
	// A chain that this decision does not continue ends before the machine
	// is seen to leave classifying, so the counter is 0 by the time it is
	// idle.
	if tr.Event != transitions.Retry && tr.Event != transitions.Exhaust {
		s.endChain(text)
	}
	s.emit(stateChangeEvent(tr))
	switch tr.Event {
	case transitions.Retry:
		s.beginRetry(m, v)
	case transitions.Exhaust:
		attempts := l.attempt
		s.endChain(text)
		s.failTurn(&ExhaustedError{Attempts: attempts, Last: text})
		s.passThrough()
	case transitions.Overflow:
		// The check before a prompt compacts an old overflow without
		// marking the episode: the new prompt's own overflow still gets
		// its one recovery.
		recovery := sig == transitions.RunEnded
		l.episodeCompacted = recovery
		s.removeMessage(m.ID)
		s.startCompaction(ReasonOverflow, recovery, !recovery)
	case transitions.Threshold:
		s.startCompaction(ReasonThreshold, false, sig == transitions.PromptCheck)
	case transitions.Refuse:
		const refused = "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model."
		s.emit(AutoCompactionStart{Reason: ReasonOverflow})
		s.emit(AutoCompactionEnd{Aborted: false, WillRetry: false, ErrorMessage: refused})
		s.failTurn(fmt.Errorf("%w: %s", ErrOverflow, overflowText(m)))
	case transitions.Unrecovered:
		s.failTurn(fmt.Errorf("%w: %s", ErrOverflow, overflowText(m)))
	case transitions.Settle:
		switch {
		case m.StopReason == classify.StopReasonAborted:
			s.failTurn(ErrAborted)
		case m.IsError():
			s.failTurn(fmt.Errorf("%w: %s", ErrProvider, m.ErrorMessage))
		}
	}
}

// endChain ends an active chain that a run ended some other way than by a
// retry or a success (policy §3.5).
func (s *Session) endChain(finalError string) {
	l := &s.loop
	if l.attempt > 0 {
		s.emit(AutoRetryEnd{Success: false, Attempt: l.attempt, FinalError: finalError})
		l.attempt = 0
	}
}

func overflowText(m *Message) string {
	if m.ErrorMessage != "" {
		return m.ErrorMessage
	}
	return fmt.Sprintf("the model's usage (%d tokens) exceeds its context window", contextTokens(m.Usage))
}

// beginRetry schedules a retry of m (policy §3.4): at once after a
// credential switch.
func (s *Session) beginRetry(m *Message, v verdict) {
	l := &s.loop
	l.attempt++
	delay := retryDelay(l.cfg.Retry, l.attempt, s.random(), v.RetryAfter, v.HasRetryAfter)
	if v.switched {
		delay = 0
	}
	s.emit(AutoRetryStart{Attempt: l.attempt, MaxAttempts: l.cfg.Retry.MaxRetries, DelayMs: delay.Milliseconds(), ErrorMessage: m.ErrorMessage})
	s.removeMessage(m.ID)
	l.ids++
	l.backoff = l.ids
	l.deadline = time.Now().Add(delay)
	if l.timer == nil {
		l.timer = time.AfterFunc(delay, s.timerFired)
	} else {
		l.timer.Reset(delay)
	}
}

// timerFired runs on the timer's goroutine: it hands the firing to the loop.
func (s *Session) timerFired() {
	s.post(s.onTimer)
}

// removeMessage removes the message with this ID from the runtime context,
// and nothing else. History keeps the message, and records the removal so
// that a session reopened on it rebuilds the same context (see restore).
func (s *Session) removeMessage(id string) {
	l := &s.loop
	if rest, ok := withoutMessage(l.runtime, id); ok {
		l.runtime = rest
		s.recordRemoval(id)
	}
}

// onTimer handles a backoff timer: the wait is over, continue.
func (s *Session) onTimer() {
	l := &s.loop
	current := l.backoff != 0 && !time.Now().Before(l.deadline)
	if _, ok := s.step(transitions.Facts{Signal: transitions.TimerFired, CurrentTimer: current}); !ok {
		return
	}
	l.backoff = 0
	s.startRun(nil)
}

func (s *Session) stopTimer() {
	if s.loop.backoff != 0 {
		s.loop.timer.Stop()
		s.loop.backoff = 0
	}
}

// abortRetry cancels a pending wait (AbortRetry).
func (s *Session) abortRetry() {
	if _, ok := s.step(transitions.Facts{Signal: transitions.AbortRetryCalled}); !ok {
		return
	}
	s.stopTimer()
	s.cancelChain()
	s.failTurn(ErrRetryCancelled)
	s.passThrough()
}

// cancelChain ends an active chain as cancelled.
func (s *Session) cancelChain() {
	l := &s.loop
	if l.attempt > 0 {
		s.emit(AutoRetryEnd{Success: false, Attempt: l.attempt, FinalError: "Retry cancelled"})
		l.attempt = 0
	}
}

// abortAll stops everything (Abort) and closes quiet when the session is.
func (s *Session) abortAll(cause error, quiet chan struct{}) {
	l := &s.loop
	s.failTurn(ErrAborted)
	if r := l.run; r != nil {
		// Whatever the run still reports decides nothing: it cannot start
		// a retry, a compaction or a continuation.
		r.aborted = true
		r.cancel(cause)
	}
	if j := l.job; j != nil {
		j.cancel(errCompactionAborted)
		if j.manual != nil {
			s.endJobAborted(j)
		}
	}
	if _, ok := s.step(transitions.Facts{Signal: transitions.AbortCalled}); ok {
		s.stopTimer()
		s.cancelChain()
		if j := l.job; j != nil {
			s.endJobAborted(j)
		}
		s.passThrough()
	}
	if l.turn != nil {
		// A prompt still waiting for the check before it is not sent.
		l.turn.prompt = nil
	}
	l.quiet = append(l.quiet, quiet)
}

// abortCompaction cancels the compaction in flight (AbortCompaction).
func (s *Session) abortCompaction() {
	l := &s.loop
	j := l.job
	if j == nil {
		return
	}
	j.cancel(errCompactionAborted)
	if j.manual != nil {
		l.job = nil
		j.manual(CompactionResult{}, ErrCompactionCancelled)
		return
	}
	if _, ok := s.step(transitions.Facts{Signal: transitions.AbortCompactionCalled}); ok {
		s.endJobAborted(j)
		s.passThrough()
	}
}

// endJobAborted reports an automatic compaction as aborted.
func (s *Session) endJobAborted(j *compactionJob) {
	l := &s.loop
	l.job = nil
	if j.manual != nil {
		j.manual(CompactionResult{}, ErrCompactionCancelled)
		return
	}
	s.emit(AutoCompactionEnd{Aborted: true, WillRetry: false})
	if j.reason == ReasonOverflow && !j.check {
		s.failTurn(fmt.Errorf("%w: %w", ErrOverflow, ErrCompactionCancelled))
	}
}

// settle finishes the turn and releases Abort's waiters once the session
// is at rest. It runs after every command.
func (s *Session) settle() {
	l := &s.loop
	// The getters must already read the settled state when Abort or Prompt
	// returns, or a subscriber sees turn_settled.
	s.publish()
	if l.run == nil && l.job == nil {
		for _, q := range l.quiet {
			close(q)
		}
		l.quiet = nil
	}
	t := l.turn
	if t == nil || l.run != nil || l.job != nil || l.backoff != 0 || l.machine.State() != states.Idle {
		return
	}
	if t.prompt != nil {
		s.sendPrompt()
		return
	}
	l.turn = nil
	ev := TurnSettled{Success: t.err == nil}
	if t.err != nil {
		ev.Error = t.err.Error()
	}
	s.emit(ev)
	t.reply <- t.err
}
