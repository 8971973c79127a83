package policy

import (
	"errors"
	"time"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/transcript"
)

// recordRecovery notes r in history, at at: what the session did to recover, which changes nothing in the
// runtime context (see transcript.Recovery). Its entry's ID is its kind,
// a colon and the ID of the last message of the runtime context, the
// message it is about ("retry:msg-4": the failed call's, for a retry or a
// chain's end, since both are decided before the failed message is
// removed); no message has such an ID.
func (e *Engine) recordRecovery(at time.Time, r *transcript.Recovery) {
	id := string(r.Kind) + ":"
	if n := len(e.ctx.msgs); n > 0 {
		id += e.ctx.msgs[n-1].ID
	}
	e.record(transcript.Entry{Type: transcript.EntryRecovery, ID: id, Timestamp: at.UnixMilli(), Recovery: r})
}

// The record functions below note what they are given only when
// Setup.Recovery asked for it, and then allocate their entry.

// recordRetry notes the retry ev (an AutoRetryStart) of the step s.
func (e *Engine) recordRetry(s *step, ev events.AutoRetryStart) {
	if !e.recovery {
		return
	}
	r := &transcript.Recovery{Kind: transcript.RecoveryRetry, Attempt: ev.Attempt, MaxAttempts: ev.MaxAttempts, DelayMs: ev.DelayMs,
		ElapsedMs: ev.ElapsedMs, MaxElapsedMs: ev.MaxElapsedMs, Class: classText(ev.ErrorClass), Error: ev.ErrorMessage,
		Provider: ev.Provider, Model: ev.Model, Credential: ev.Credential, CredentialSwitched: s.facts.CredentialSwitched}
	if !ev.ResetAt.IsZero() {
		r.ResetAt = ev.ResetAt.UnixMilli()
	}
	e.recordRecovery(s.at, r)
}

// recordChainEnd notes the end of a retry chain, ev (an AutoRetryEnd).
// A chain that Abort, AbortRetry or a manual compaction cancelled is not
// noted: closing a session cancels its chain, and history must not move on
// after a snapshot taken before the close (session.WithSnapshot).
func (e *Engine) recordChainEnd(at time.Time, ev events.AutoRetryEnd) {
	if !e.recovery || ev.Outcome == events.RetryCancelled {
		return
	}
	e.recordRecovery(at, &transcript.Recovery{Kind: transcript.RecoveryChainEnd, Attempt: ev.Attempt, Outcome: string(ev.Outcome),
		Limit: string(ev.Limit), Class: classText(ev.ErrorClass), Error: ev.FinalError})
}

// recordCompactionFailed notes an automatic compaction for reason that
// ended without a summary, with the message of its AutoCompactionEnd.
func (e *Engine) recordCompactionFailed(at time.Time, reason transcript.CompactionReason, msg string) {
	if !e.recovery {
		return
	}
	e.recordRecovery(at, &transcript.Recovery{Kind: transcript.RecoveryCompactionFailed, Reason: string(reason), Error: msg})
}

// recordTurnFailed notes a turn that failed in err, of class. A turn
// that failed because history could not be written is not noted (its
// entry could not be written either), nor one that was aborted or whose
// chain was cancelled, for the reason recordChainEnd gives.
func (e *Engine) recordTurnFailed(at time.Time, err error, class classify.Class) {
	if !e.recovery || err == nil || errors.Is(err, ErrHistory) || errors.Is(err, ErrAborted) || errors.Is(err, ErrRetryCancelled) {
		return
	}
	e.recordRecovery(at, &transcript.Recovery{Kind: transcript.RecoveryTurnFailed, Error: err.Error(), Class: classText(class)})
}

// classText is class as history writes it ("retryable"), "" for None.
func classText(class classify.Class) string {
	if class == classify.None {
		return ""
	}
	return class.String()
}
