package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// executor is what the loop's goroutine owns: the engine, and the handles
// of what the engine's effects started.
type executor struct {
	engine *policy.Engine

	// timer is the session's one backoff timer, reused for each wait;
	// timerID is the engine's name for the wait it is armed for.
	timer   *time.Timer
	timerID policy.TimerID

	runID     policy.RunID
	runCancel context.CancelCauseFunc
	// limited is the run the limiter admitted and has not been told the
	// end of (WithLimiter): its provider and credential, and its last
	// assistant message so far.
	limited    *limitedRun
	compID     policy.CompactionID
	compCancel context.CancelCauseFunc

	// reply receives the turn's result; compact, a manual compaction's.
	reply chan error
	// turnCtx is the context of the turn in flight (its values only); nil
	// outside a turn.
	turnCtx context.Context
	compact func(transcript.Compaction, error)
	// quiet is the channel Abort's callers wait on, closed once nothing
	// is in flight; nil when none waits.
	quiet chan struct{}
}

// errCompactionAborted is the cause a cancelled summarizer's context
// carries.
var errCompactionAborted = errors.New("compaction aborted")

// apply carries out effects, in order. The answers the engine waits for (a
// history append it awaits or that failed, the credential store's answer
// to a usage limit, a run the shared limit holds) are fed back once the
// batch is done, since feeding the engine reuses the slice the batch is
// in; the append's first, as the engine's next input (see
// policy.Engine.Appended).
func (s *Session) apply(effects []policy.Effect) {
	// The engine's state is already the input's outcome: Status reads
	// it before any of the input's events can reach a subscriber, and
	// before a caller waiting on the turn returns.
	s.publish()
	var feedback []func() []policy.Effect
	x := &s.x
	for i := range effects {
		ef := &effects[i]
		switch ef.Kind {
		case policy.Emit:
			if l := x.limited; l != nil {
				l.note(ef.Event)
			}
			if len(s.observers) > 0 {
				s.observe(ef.Event)
			}
			s.subs.emit(ef.Event)
		case policy.StartRun:
			cred, hasCred := s.currentCredential()
			if until, key, reason := s.admit(cred.ID); !until.IsZero() {
				// The shared limit holds the run's key: it makes no
				// call, and the engine's table decides the wait.
				id, credID := ef.Run, cred.ID
				feedback = append(feedback, func() []policy.Effect {
					return x.engine.RunReturned(time.Now(), id, policy.RunReturn{Credential: credID, HeldUntil: until, HeldKey: key, HeldReason: reason})
				})
				continue
			}
			s.startRun(ef.Run, ef.Prompt, ef.Context, ef.Model, cred, hasCred)
		case policy.CancelRun:
			if x.runID == ef.Run && x.runCancel != nil {
				x.runCancel(ef.Cause)
			}
		case policy.StartTimer:
			x.timerID = ef.Timer
			if d := time.Until(ef.Deadline); x.timer == nil {
				x.timer = time.AfterFunc(d, s.timerFired)
			} else {
				x.timer.Reset(d)
			}
		case policy.StopTimer:
			x.stopTimer()
		case policy.StartCompaction:
			s.startCompaction(ef.Compaction, *ef.Request)
		case policy.CancelCompaction:
			if x.compID == ef.Compaction && x.compCancel != nil {
				x.compCancel(errCompactionAborted)
			}
		case policy.Append:
			err := s.append(ef.Entries)
			if err != nil || ef.Await {
				// The answer to this input: the engine's next, before
				// any other answer (a held run's, the credential
				// store's), whose input would take the place of this
				// one's entries that a failure undoes.
				feedback = slices.Insert(feedback, 0, func() []policy.Effect { return x.engine.Appended(time.Now(), err) })
			}
		case policy.MarkUsageLimit:
			switched := s.markUsageLimit(ef.Hint)
			feedback = append(feedback, func() []policy.Effect { return x.engine.UsageLimitAnswered(time.Now(), switched) })
		case policy.FinishTurn:
			x.turnCtx = nil
			if x.reply != nil {
				x.reply <- ef.Err
				x.reply = nil
			}
		case policy.FinishCompact:
			if x.compact != nil {
				var res transcript.Compaction
				if ef.Result != nil {
					res = *ef.Result
				}
				x.compact(res, ef.Err)
				x.compact = nil
			}
		}
	}
	for _, f := range feedback {
		s.apply(f())
	}
	// Carried out: the engine's next input, or another engine's, reuses
	// the effects' room, and a session that waits keeps none.
	x.engine.Release()
}

func (x *executor) stopTimer() {
	if x.timer != nil {
		x.timer.Stop()
	}
}

// timerFired runs on the timer's goroutine: it hands the firing to the loop.
func (s *Session) timerFired() {
	s.post(func() { s.apply(s.x.engine.TimerFired(time.Now(), s.x.timerID)) })
}

// append writes entries to history, in order, in one Append; it logs a
// failure. A History that panics is recovered, logged, and fails the write.
func (s *Session) append(entries []transcript.Entry) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.logPanic("history", r)
			err = fmt.Errorf("session: the history panicked: %v", r)
		}
	}()
	if err := s.history.Append(entries...); err != nil {
		logError(s.callerCtx(context.Background()), s.logger, "session: history append failed", func() []any { return []any{"error", err} })
		return err
	}
	return nil
}

// startRun starts run id on its own goroutine, on model: the user's
// (prompt set) or a continuation. Its events and its end come back to the loop through post.
//
// The run's context has the values of the turn's, and those the observers
// add.
func (s *Session) startRun(id policy.RunID, prompt *transcript.Message, msgs []transcript.Message, model policy.Model, c policy.Credential, hasCred bool) {
	req := RunRequest{SessionID: s.x.engine.SessionID(), Prompt: prompt, Context: msgs, Model: model}
	if hasCred {
		req.Credential = &c
	}
	if s.limiter != nil {
		s.x.limited = &limitedRun{id: id, credential: c.ID}
	}
	base, end := s.startObservedRun(req)
	ctx, cancel := context.WithCancelCause(s.secrets.with(base))
	s.x.runID, s.x.runCancel = id, cancel
	go func() {
		// What the run reports is redacted here, before the engine sees
		// it: nothing the session emits, appends, logs or returns can hold
		// a secret the agent noted (NoteSecret).
		red := &runRedaction{r: s.secrets}
		post := func(ev events.Event) { s.post(func() { s.apply(s.x.engine.RunEvent(time.Now(), id, ev)) }) }
		emit := func(ev events.Event) { red.each(ev, post) }
		// Deferred, so that a Run that calls runtime.Goexit, which no
		// recover stops, still ends as one that panicked.
		ret := policy.RunReturn{Panic: errGoexit}
		defer func() { s.runReturned(id, req, cancel, end, ret) }()
		ret = s.runAgent(ctx, req, emit)
	}()
}

// runReturned hands the end of run id, which returned ret, to the loop.
func (s *Session) runReturned(id policy.RunID, req RunRequest, cancel context.CancelCauseFunc, end func(error), ret policy.RunReturn) {
	if ret.Panic == errGoexit {
		s.logPanic("agent", ret.Panic)
	}
	cancel(nil)
	ret.Err = s.secrets.error(ret.Err)
	ret.Panic = s.secrets.panicValue(ret.Panic)
	s.post(func() {
		if s.x.runID == id {
			s.x.runCancel = nil // nothing left to cancel
		}
		ret.Draw = s.draw()
		if req.Credential != nil {
			ret.Credential = req.Credential.ID
		}
		if end != nil {
			err := ret.Err
			if ret.Panic != nil {
				err = fmt.Errorf("the agent panicked: %v", ret.Panic)
			}
			end(err)
		}
		effects := s.x.engine.RunReturned(time.Now(), id, ret)
		if l := s.x.limited; l != nil && l.id == id {
			// The limiter learns how the run ended before anything the
			// decision starts: an error the engine made of the run's
			// return is among the effects.
			for i := range effects {
				if effects[i].Kind == policy.Emit {
					l.note(effects[i].Event)
				}
			}
			s.x.limited = nil
			s.limitDone(l)
		}
		s.apply(effects)
	})
}

// draw returns the random source's next number (WithRandom). A source
// that panics is recovered, logged, and gives 0: no jitter.
func (s *Session) draw() (r float64) {
	defer func() {
		if v := recover(); v != nil {
			s.logPanic("random source", v)
			r = 0
		}
	}()
	return s.random()
}

// runAgent calls the agent; a panic is recovered, logged with its stack,
// and returned as the run's Panic.
func (s *Session) runAgent(ctx context.Context, req RunRequest, emit func(events.Event)) (ret policy.RunReturn) {
	defer func() {
		if r := recover(); r != nil {
			s.logPanic("agent", r)
			ret = policy.RunReturn{Panic: r}
		}
	}()
	return policy.RunReturn{Err: s.agent.Run(ctx, req, emit)}
}

// startCompaction runs the summarizer for compaction id on its own
// goroutine, with the credential the session's next run would get; the
// answer comes back to the loop through post.
func (s *Session) startCompaction(id policy.CompactionID, req policy.SummaryRequest) {
	if c, ok := s.currentCredential(); ok {
		req.Credential = &c
	}
	ctx, cancel := context.WithCancelCause(s.secrets.with(context.Background()))
	s.x.compID, s.x.compCancel = id, cancel
	go func() {
		// Deferred, so that a summarizer that calls runtime.Goexit, which
		// no recover stops, still ends as one that panicked.
		var sum policy.Summary
		err := fmt.Errorf("the summarizer panicked: %w", errGoexit)
		goexit := true
		defer func() {
			if goexit {
				s.logPanic("summarizer", errGoexit)
			}
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			// The summary is redacted as a run's results are.
			sum.Text, err = s.secrets.text(sum.Text), s.secrets.error(err)
			cancel(nil)
			s.post(func() {
				if s.x.compID == id {
					s.x.compCancel = nil
				}
				s.apply(s.x.engine.CompactionFinished(time.Now(), id, sum, err))
			})
		}()
		sum, err = s.summarize(ctx, req)
		goexit = false
	}()
}

// summarize calls the summarizer; a panic is recovered, logged with its
// stack, and becomes the compaction's error.
func (s *Session) summarize(ctx context.Context, req policy.SummaryRequest) (sum policy.Summary, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.logPanic("summarizer", r)
			err = fmt.Errorf("the summarizer panicked: %v", r)
		}
	}()
	return s.summarizer.Summarize(ctx, req)
}

// currentCredential asks the credential store for the credential of the
// next run. A store that panics is logged and gives none.
func (s *Session) currentCredential() (c policy.Credential, ok bool) {
	if s.creds == nil || s.x.engine.Model().Provider == "" {
		return policy.Credential{}, false
	}
	defer func() {
		if r := recover(); r != nil {
			s.logPanic("credential store", r)
			c, ok = policy.Credential{}, false
		}
	}()
	return s.creds.Current(s.x.engine.Model().Provider, s.x.engine.SessionID())
}

// limitedRun is a run the limiter admitted (WithLimiter): what Done is
// told when it ends.
type limitedRun struct {
	id         policy.RunID
	credential string
	last       *transcript.Message
}

// note keeps the run's last assistant message.
func (l *limitedRun) note(ev events.Event) {
	if me, ok := ev.(events.MessageEnd); ok && me.Message.Role == transcript.RoleAssistant {
		m := me.Message
		l.last = &m
	}
}

// admit asks the limiter whether the next run, on the session's provider
// and credential, may start: the zero time when it may (or there is no
// limiter), else until when its key is held, the key and why. A limiter
// that panics is logged and admits the run.
func (s *Session) admit(credential string) (until time.Time, key, reason string) {
	if s.limiter == nil {
		return time.Time{}, "", ""
	}
	defer func() {
		if r := recover(); r != nil {
			s.logPanic("limiter", r)
			until, key, reason = time.Time{}, "", ""
		}
	}()
	return s.limiter.Admit(s.x.engine.Model().Provider, credential)
}

// limitDone tells the limiter how the run it admitted ended. A limiter that
// panics is logged.
func (s *Session) limitDone(l *limitedRun) {
	defer func() {
		if r := recover(); r != nil {
			s.logPanic("limiter", r)
		}
	}()
	s.limiter.Done(s.x.engine.Model().Provider, l.credential, l.last)
}

// markUsageLimit tells the credential store of a usage limit. A store that
// panics is logged, and switched nothing.
func (s *Session) markUsageLimit(hint time.Duration) (switched bool) {
	if s.creds == nil {
		return false
	}
	defer func() {
		if r := recover(); r != nil {
			s.logPanic("credential store", r)
			switched = false
		}
	}()
	m := s.x.engine.Model()
	return s.creds.MarkUsageLimitReached(m.Provider, s.x.engine.SessionID(), hint, m.BaseURL)
}
