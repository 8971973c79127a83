package policy

import (
	"fmt"
	"time"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// verdict is what the decision learnt about a message besides its facts.
type verdict struct {
	classify.Result
	// switched: the credential store moved the session to a free
	// credential after a usage limit.
	switched bool
}

// class is the class the decision acts on, as the events report it:
// UsageLimit for an error that takes the usage-limit branch, also one the
// seed rules class as Retryable.
func (v verdict) class() classify.Class {
	if v.UsageLimit {
		return classify.UsageLimit
	}
	return v.Class
}

// pending is a decision waiting for the credential store's answer to a
// usage limit.
type pending struct {
	msg   *Message
	facts transitions.Facts
	v     verdict
	draw  float64
}

// facts gathers what the guards read about m.
func (e *Engine) facts(at time.Time, m *Message, sig transitions.Signal) (transitions.Facts, verdict) {
	f := transitions.Facts{
		Signal:            sig,
		RetryEnabled:      e.cfg.Retry.Enabled,
		Attempt:           e.attempt,
		MaxRetries:        e.cfg.Retry.MaxRetries,
		CompactionEnabled: e.cfg.Compaction.Enabled,
		EpisodeCompacted:  e.episodeCompacted,
		ContextWindow:     e.model.ContextWindow,
		ReserveTokens:     e.cfg.Compaction.ReserveTokens,
	}
	var v verdict
	switch m.Err.(type) {
	case *panicError, *invalidMessageError:
		v.Result = classify.Result{Class: classify.Fatal}
	case *interruptedError:
		v.Result = classify.Result{Class: classify.Retryable}
	default:
		v.Result = e.cfg.Retry.Rules.Classify(m.classifyMessage(e.model.ContextWindow), at)
	}
	f.Class = v.Class
	f.Error = m.IsError()
	f.Aborted = m.StopReason == classify.StopReasonAborted
	f.HintOverCap = hintOverCap(e.cfg.Retry, v.RetryAfter, v.HasRetryAfter)
	f.SameModel = m.Provider == e.model.Provider && m.Model == e.model.ID
	f.Stale = e.ctx.compactionSeq > 0 && e.ctx.seq[m.ID] <= e.ctx.compactionSeq
	f.Tokens = contextTokens(m.Usage)
	return f, v
}

// decide is the decision at agent_end (docs/policy.md §1), and the check
// before a prompt (docs/policy.md §4.6), on the message m. After a run on a usage limit it
// first asks the credential store (MarkUsageLimit) and decides on its
// answer: the switch comes before the rule that ends a chain on a retry
// hint above the cap.
func (e *Engine) decide(at time.Time, m *Message, sig transitions.Signal, draw float64) {
	f, v := e.facts(at, m, sig)
	if sig == transitions.RunEnded && v.UsageLimit && e.creds && e.model.Provider != "" {
		var hint time.Duration
		if v.HasRetryAfter {
			hint = v.RetryAfter
		}
		e.pending = &pending{msg: m, facts: f, v: v, draw: draw}
		e.effect(Effect{Kind: MarkUsageLimit, Hint: hint})
		return
	}
	e.apply(at, m, f, v, draw)
}

// UsageLimitAnswered is the credential store's answer to MarkUsageLimit:
// whether it switched the session to another free credential. The decision
// waiting on it goes on.
func (e *Engine) UsageLimitAnswered(at time.Time, switched bool) []Effect {
	e.begin()
	if p := e.pending; p != nil {
		e.pending = nil
		p.facts.CredentialSwitched = switched
		p.v.switched = switched
		e.apply(at, p.msg, p.facts, p.v, p.draw)
	}
	return e.end(at)
}

// apply takes the decision the table makes for f.
func (e *Engine) apply(at time.Time, m *Message, f transitions.Facts, v verdict, draw float64) {
	if f.Signal == transitions.RunEnded {
		if _, ok := e.step(f); !ok { // idle or continuing → classifying
			return
		}
	}
	tr, ok := e.take(f)
	if !ok {
		return // the check before a prompt found nothing to do
	}
	text := m.ErrorMessage
	// A chain that this decision does not continue ends before the machine
	// is seen to leave classifying, so the counter is 0 by the time it is
	// idle.
	if tr.Event != transitions.Retry && tr.Event != transitions.Exhaust {
		e.endChain(text, RetryFailed, v.class())
	}
	e.emit(stateChangeEvent(tr))
	switch tr.Event {
	case transitions.Retry:
		e.beginRetry(at, m, v, draw)
	case transitions.Exhaust:
		attempts := e.attempt
		e.endChain(text, RetryExhausted, v.class())
		e.failTurnOn(&ExhaustedError{Attempts: attempts, Last: text, Err: m.Err}, v.class())
		e.passThrough()
	case transitions.Overflow:
		// The check before a prompt compacts an old overflow without
		// marking the episode: the new prompt's own overflow still gets
		// its one recovery.
		recovery := f.Signal == transitions.RunEnded
		e.episodeCompacted = recovery
		e.removeMessage(at, m.ID)
		e.startCompaction(at, ReasonOverflow, recovery, !recovery)
	case transitions.Threshold:
		e.startCompaction(at, ReasonThreshold, false, f.Signal == transitions.PromptCheck)
	case transitions.Refuse:
		const refused = "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model."
		e.emit(AutoCompactionStart{Reason: ReasonOverflow})
		e.emit(AutoCompactionEnd{Aborted: false, WillRetry: false, ErrorMessage: refused})
		e.failTurnOn(providerError(ErrOverflow, overflowText(m), m.Err), v.class())
	case transitions.Unrecovered:
		e.failTurnOn(providerError(ErrOverflow, overflowText(m), m.Err), v.class())
	case transitions.Settle:
		switch {
		case m.StopReason == classify.StopReasonAborted:
			e.failTurn(ErrAborted)
		case m.IsError():
			e.failTurnOn(providerError(ErrProvider, m.ErrorMessage, m.Err), v.class())
		}
	}
}

// endChain ends an active chain that a run ended some other way than by a
// retry or a success (docs/policy.md §3.5), with the class of the error
// that ended it.
func (e *Engine) endChain(finalError string, outcome RetryOutcome, class classify.Class) {
	if e.attempt > 0 {
		e.emit(AutoRetryEnd{Success: false, Attempt: e.attempt, FinalError: finalError, Outcome: outcome, ErrorClass: class})
		e.attempt = 0
	}
}

func overflowText(m *Message) string {
	if m.ErrorMessage != "" {
		return m.ErrorMessage
	}
	return fmt.Sprintf("the model's usage (%d tokens) exceeds its context window", contextTokens(m.Usage))
}

// idle reports whether the machine is at rest.
func (e *Engine) idle() bool { return e.state == states.Idle }
