package policy

import (
	"fmt"
	"time"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

// verdict is what the decision learnt about a message besides its facts.
type verdict struct {
	classify.Result
	// tooLarge says why no compaction can make the context fit, with
	// facts.TooLarge.
	tooLarge *tooLargeError
	// resetAt is when the wait for the reset of the limit of a message
	// with a retry hint ends: the decision's time plus the hint, rounded
	// up to a millisecond, or plus the chain's own delay when that is
	// longer (no later than lastInstant).
	resetAt time.Time
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

// facts gathers what the guards read about m; draw is the random number
// for the jitter of the delay it draws.
func (e *Engine) facts(at time.Time, m *transcript.Message, sig transitions.Signal, draw float64) (transitions.Facts, verdict) {
	f := e.settingsFacts(at, sig)
	var v verdict
	switch m.Err.(type) {
	case *panicError, *invalidMessageError:
		v.Result = classify.Result{Class: classify.Fatal}
	case *interruptedError:
		v.Result = classify.Result{Class: classify.Retryable}
	default:
		v.Result = e.cfg.Retry.Rules.Classify(classifyMessage(*m, e.model.ContextWindow), at)
	}
	f.Class = v.Class
	f.UsageLimit = v.UsageLimit
	f.Error = m.IsError()
	f.Aborted = m.StopReason == transcript.StopReasonAborted
	f.HintOverCap = hintOverCap(e.cfg.Retry, v.RetryAfter, v.HasRetryAfter)
	f.DelayMs = min(retryDelay(e.cfg.Retry, e.attempt+1, draw, v.RetryAfter, v.HasRetryAfter), untilLast(at)).Milliseconds()
	f.WaitForReset = e.cfg.Retry.WaitForReset
	f.ResetWaited = e.resetWaited
	if v.HasRetryAfter {
		// No sooner than the chain's own delay: a reset already passed (a
		// clock behind the provider's) must not retry at once, again and
		// again, as fast as runs fail.
		resetIn := min(max(ceilMs(v.RetryAfter), time.Duration(f.DelayMs)*time.Millisecond), untilLast(at))
		v.resetAt = at.Add(resetIn)
		f.ResetKnown, f.ResetInMs = true, resetIn.Milliseconds()
		f.ResetWithin = v.RetryAfter <= msToDuration(e.cfg.Retry.MaxResetWaitMs)
	}
	f.SameModel = m.Provider == e.model.Provider && m.Model == e.model.ID
	if sig != transitions.PromptCheck && (v.Class == classify.Retryable || v.Class == classify.UsageLimit) {
		e.fallbackFacts(m, &f.FallbackAvailable, &f.FallbackOnOverload, &f.Overloaded, &f.FallbackTooSmall)
	}
	f.Stale = e.ctx.compactionSeq > 0 && e.ctx.position(m.ID) <= e.ctx.compactionSeq
	f.Tokens = contextTokens(m.Usage)
	if sig == transitions.RunEnded && v.Class == classify.Overflow && !f.Stale {
		// The provider's count of the request that overflowed is the best
		// measure of the context there is: it calibrates the estimate
		// before the decision weighs what a compaction can keep.
		e.calibrateOverflow(m, v.Result)
		if f.SameModel {
			v.tooLarge = e.tooLarge(e.contextWithout(m), e.window())
			f.TooLarge = v.tooLarge != nil
		}
	}
	return f, v
}

// settingsFacts are the facts of a decision on sig that the session's
// settings, model and turn give, before any message is read.
func (e *Engine) settingsFacts(at time.Time, sig transitions.Signal) transitions.Facts {
	return transitions.Facts{
		Signal:            sig,
		RetryEnabled:      e.cfg.Retry.Enabled,
		Attempt:           e.attempt,
		MaxRetries:        e.cfg.Retry.MaxRetries,
		MaxElapsedMs:      e.cfg.Retry.MaxElapsedMs,
		ElapsedMs:         e.chain.elapsedMs(e.attempt, at),
		CompactionEnabled: e.cfg.Compaction.Enabled,
		EpisodeCompacted:  e.turn != nil && e.turn.episodeCompacted,
		ContextWindow:     e.model.ContextWindow,
		ReserveTokens:     e.cfg.Compaction.ReserveTokens,
		CredentialStore:   e.creds && e.model.Provider != "",
		Started:           true,
	}
}

// decide steps the machine on the message m: the decision at agent_end
// (docs/policy.md §1) and the check before a prompt (§4.6).
func (e *Engine) decide(at time.Time, m *transcript.Message, sig transitions.Signal, draw float64, continuation bool) {
	f, v := e.facts(at, m, sig, draw)
	e.fire(&step{at: at, facts: f, msg: m, v: v, draw: draw, continuation: continuation})
}

// decideRun is decide at a run's end: credential is the ID of the
// credential the run called its provider with.
func (e *Engine) decideRun(at time.Time, m *transcript.Message, draw float64, continuation bool, credential string) {
	f, v := e.facts(at, m, transitions.RunEnded, draw)
	e.fire(&step{at: at, facts: f, msg: m, v: v, draw: draw, continuation: continuation, credential: credential})
}

// askCredentialStore tells the credential store about a usage limit and
// keeps the decision until it answers (UsageLimitAnswered).
func (e *Engine) askCredentialStore(s *step) {
	var hint time.Duration
	if s.v.HasRetryAfter {
		hint = s.v.RetryAfter
	}
	p := *s
	e.pending = &p
	e.effect(Effect{Kind: MarkUsageLimit, Hint: hint})
}

// UsageLimitAnswered is the credential store's answer to MarkUsageLimit:
// whether it switched the session to another free credential. The decision
// waiting on it goes on.
func (e *Engine) UsageLimitAnswered(at time.Time, switched bool) []Effect {
	e.begin()
	if p := e.pending; p != nil {
		e.pending = nil
		p.at = at
		p.facts.Signal = transitions.CredentialAnswered
		p.facts.CredentialSwitched = switched
		e.fire(p)
	}
	return e.end(at)
}

// endChain ends an active chain that a run ended some other way than by a
// retry or a success (docs/policy.md §3.5), with the class of the error
// that ended it.
func (e *Engine) endChain(at time.Time, finalError string, outcome events.RetryOutcome, class classify.Class) {
	e.endChainAt(at, finalError, outcome, class, "")
}

// endChainAt is endChain for a chain that a limit ended (exhausted):
// limit names it.
func (e *Engine) endChainAt(at time.Time, finalError string, outcome events.RetryOutcome, class classify.Class, limit events.RetryLimit) {
	if e.attempt > 0 {
		ev := events.AutoRetryEnd{Success: false, Attempt: e.attempt, FinalError: finalError, Outcome: outcome, ErrorClass: class, Limit: limit, ResetWait: e.resetWaited}
		e.emit(ev)
		e.recordChainEnd(at, ev)
		e.attempt, e.chain, e.resetWaited = 0, chain{}, false
	}
}

func overflowText(m *transcript.Message) string {
	if m.ErrorMessage != "" {
		return m.ErrorMessage
	}
	return fmt.Sprintf("the model's usage (%d tokens) exceeds its context window", contextTokens(m.Usage))
}

// state is the machine's state.
func (e *Engine) state() states.State { return e.machine.State() }
