package policy

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/internal/wiretext"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

// SummaryRequest is what a Summarizer is given. Messages and Kept are
// parts of the runtime context, shared as a run's context is (see
// StartRun): read them, never change them.
type SummaryRequest struct {
	// Messages are the messages being cut, oldest first. When an earlier
	// compaction's summary is among them it comes first, with RoleSummary.
	Messages []transcript.Message
	// Kept are the messages that stay after the summary, as they stay: a
	// tool result too large to keep whole is there truncated (see
	// transcript.TruncateToolResult and Compaction.Truncated).
	Kept []transcript.Message
	// Reason is why the compaction runs.
	Reason transcript.CompactionReason
	// Instructions are the caller's, for a manual compaction.
	Instructions string
	// MaxChars is the longest summary the session keeps, in characters as
	// its token estimate counts them (bytes of UTF-8): a quarter of the
	// compaction threshold, or less when Kept leaves less room under it.
	// The session cuts a longer summary to its last MaxChars characters.
	// 0 means no limit: the model's context window is unknown.
	MaxChars int
	// TokenRatio is the session's token ratio when the compaction started
	// (docs/session.md "Calibration"): how many tokens the provider counts
	// for each token of the chars/4 estimate, 0 before any count (read as
	// 1). A summarizer that sizes its own request to the model in
	// characters divides by it, so the request fits by the provider's
	// count.
	TokenRatio float64
	// Model is the session's model when the compaction started.
	Model Model
	// Credential is the credential the session's runs use when the
	// compaction started (after any usage-limit switch), nil when the
	// session has no credential store. A summarizer that calls the model
	// calls it with these, so its call follows a key switch.
	Credential *Credential
	// Retry is the session's retry settings when the compaction started.
	// A summarizer that calls the model retries a call that fails on a
	// transient error (an overloaded or unavailable server, a network
	// failure: the class Retryable under Retry.Rules) within them, as the
	// session retries a run: as Retry.Next says, and never once its
	// context ends. The zero value (Enabled false) retries nothing.
	Retry RetryConfig
}

// Next says whether a call that failed with failure is retried under c,
// and after how long: the transition table's decision on a run that ended
// so as retry n (from 1), elapsed after the first failure, for a caller
// with no credential store, fallback model or wait for a reset (a
// summarizer's call, say). The call is retried when the table's rule
// leads to backoff (rule retry); it is not when the rule ends the chain
// (exhaust, exhaust_elapsed, the retry hint over the cap) or does not
// retry the class at all. The delay is the chain's (docs/policy.md §3.2):
// BaseDelayMs×2^(n−1), at most MaxDelayMs when set, and with
// HonorRetryAfter at least the server's hint. No jitter: a caller without
// the session's random draws waits the longest delay jitter allows.
func (c RetryConfig) Next(n int, elapsed time.Duration, failure classify.Result) (delay time.Duration, retry bool) {
	delay = retryDelay(c, n, 0, failure.RetryAfter, failure.HasRetryAfter)
	f := transitions.Facts{
		Signal:       transitions.RunEnded,
		Started:      true,
		Error:        true,
		Class:        verdict{Result: failure}.class(),
		UsageLimit:   failure.UsageLimit,
		RetryEnabled: c.Enabled,
		Attempt:      n - 1,
		MaxRetries:   c.MaxRetries,
		MaxElapsedMs: c.MaxElapsedMs,
		ElapsedMs:    elapsed.Milliseconds(),
		HintOverCap:  hintOverCap(c, failure.RetryAfter, failure.HasRetryAfter),
		DelayMs:      delay.Milliseconds(),
	}
	r, ok := nextRetryRules.Next(states.Classifying, &f)
	return delay, ok && r.Target(states.Classifying) == states.Backoff
}

// nextRetryRules is the table RetryConfig.Next consults.
var nextRetryRules = transitions.Table()

// Summary is a Summarizer's answer.
type Summary struct {
	Text    string
	Details any
}

// Compaction errors.
var (
	// ErrNothingToCompact: everything fits in the recent messages kept.
	ErrNothingToCompact = errors.New("policy: nothing to compact")
	// ErrAlreadyCompacted: nothing was added since the last compaction.
	ErrAlreadyCompacted = errors.New("policy: already compacted")
	// ErrCompactionCancelled: AbortCompaction or Abort stopped it.
	ErrCompactionCancelled = errors.New("policy: compaction cancelled")
)

// compaction is the compaction in flight.
type compaction struct {
	id        CompactionID
	reason    transcript.CompactionReason
	willRetry bool
	// manual: Compact's, which emits no auto_compaction events and ends
	// with FinishCompact.
	manual bool
	// check: the compaction of the check before a prompt, which never
	// fails the turn: the turn's outcome is its own run's.
	check bool
	cut   []transcript.Message
	kept  []transcript.Message
	// truncated are the tool results of kept truncated to fit (kept holds
	// them truncated).
	truncated []transcript.Truncation
	// before is the context's calibrated size when the compaction
	// started.
	before int
	// sizing is how the compaction sizes what it keeps and its summary:
	// the session's calibration, or an overflow's count (overflowCut).
	sizing calibration
	// extra is the calibrated size of the prompt that follows it (the
	// check before a prompt), 0 when none.
	extra int
	// committing: the summary is in, and its entry is being appended;
	// previousSeq is the position of the compaction before it.
	committing  bool
	previousSeq int
	entry       transcript.Entry
}

// prepareCompaction chooses what a compaction cuts (docs/policy.md §4.4):
// it returns the compaction with its cut and kept messages, or why there is
// none: ErrNothingToCompact (for an overflow's compaction with nothing
// before the last message to cut, saying so with the provider's count), or
// for an overflow's compaction a *tooLargeError when even the messages the
// last cut point keeps do not fit. Both are never empty: every cut point
// is after the first message and at or before the last. Sizes are
// calibrated (see calibration), and while an overflow's count stands, by
// that count too (see overflowCut). The prompt waiting for the check
// before it, when there is one, is room the kept messages and the summary
// leave free.
//
// When the session has a compaction threshold, a compaction makes room for
// a summary of the budget's size: if the messages kept would take more
// than the threshold less the budget, it cuts deeper, at a later valid cut
// point (the last one at most): keepRecentTokens is a target, not a floor.
// That holds too when keepRecentTokens would keep everything after the
// first message: a compaction then cuts at the first cut point at least
// when the whole context does not fit under the threshold less the
// budget (the first message is what takes the room), and a summary over
// the budget in first place (written before there was one, or by another
// summarizer) is summarized again. When the messages kept, cut that deep,
// still take more than keptLimit, their tool results are truncated, the
// largest first, until they fit (see truncateToFit): the compaction keeps
// them so, and its entry says so (Compaction.Truncated).
func (e *Engine) prepareCompaction(reason transcript.CompactionReason) (*compaction, error) {
	msgs := e.ctx.msgs
	// The prompt waiting for the check before it goes after what is kept:
	// it needs room too.
	extra := e.promptTokens()
	at, ok := cutPoint(msgs, e.cfg.Compaction.KeepRecentTokens, e.calib)
	if threshold, budget, bounded := e.summaryBudget(); bounded {
		limit := threshold - budget - extra
		if ok {
			at = deeperCut(msgs, at, limit, e.calib)
		} else if first, found := nextCutPoint(msgs, 1); found {
			at = deeperCut(msgs, first, limit, e.calib)
			// Cutting at the first cut point is worth it when everything
			// does not fit: the first message is then what takes the room.
			ok = at > first || e.calib.tokens(sizes.Tokens(msgs...)) > limit ||
				(msgs[0].Role == transcript.RoleSummary && e.calib.tokens(sizes.Message(msgs[0])) > budget)
		}
	}
	sizing := e.calib // how the compaction sizes what it keeps and its summary
	counted := 0      // an overflow's count of the context, when it gave one
	if e.overflow().tokens > 0 {
		// The provider said the context does not fit: what is kept must
		// fit by its count.
		at, ok, counted, sizing = e.overflowCut(msgs, at, ok, extra)
	}
	if reason == transcript.ReasonOverflow {
		// After an overflow a result that cannot fit is no result: the
		// continuation would overflow again.
		if tl := e.tooLarge(msgs, e.window()); tl != nil {
			return nil, tl
		}
		if !ok {
			return nil, e.nothingEarlier()
		}
	}
	if !ok {
		return nil, ErrNothingToCompact
	}
	kept := e.ctx.share(at, len(msgs))
	var cuts []transcript.Truncation
	if limit, bounded := e.keptLimit(reason, extra, sizing); bounded {
		// Cut as deep as it may be, what is kept is still over its room:
		// its largest tool results are truncated.
		kept, cuts = e.truncateToFit(kept, limit, sizing)
	}
	return &compaction{
		id:        CompactionID(e.ticket()),
		reason:    reason,
		cut:       e.ctx.share(0, at),
		kept:      kept,
		truncated: cuts,
		sizing:    sizing,
		extra:     extra,
		before:    max(sizing.tokens(sizes.Tokens(msgs...)), tokensBefore(msgs), counted),
	}, nil
}

// nothingEarlier is why an overflow's compaction finds nothing to compact:
// nothing before the last message can be cut (an overflow on a session's
// first turn, say) and the last message is not, by the calibrated count,
// over the window by itself (that is too_large). It names the provider's
// count. It matches ErrNothingToCompact.
func (e *Engine) nothingEarlier() error {
	o, window := e.overflow(), e.window()
	switch {
	case o.counted && window > 0:
		return fmt.Errorf("%w: the provider counted %d tokens, over the model's window of %d, and nothing before the last message can be compacted", ErrNothingToCompact, o.tokens, window)
	case o.counted:
		return fmt.Errorf("%w: the provider counted %d tokens, over the model's window, and nothing before the last message can be compacted", ErrNothingToCompact, o.tokens)
	case window > 0:
		return fmt.Errorf("%w: the provider said the request is over the model's window of %d, and nothing before the last message can be compacted", ErrNothingToCompact, window)
	}
	return fmt.Errorf("%w: the provider said the request is over the model's window, and nothing before the last message can be compacted", ErrNothingToCompact)
}

// promptTokens is the calibrated size of the user's prompt waiting for
// the check before it, 0 when none is.
func (e *Engine) promptTokens() int {
	if e.turn == nil || e.turn.prompt == nil {
		return 0
	}
	return e.calib.tokens(sizes.Message(*e.turn.prompt))
}

// keptLimit is the most tokens, sized by c, the messages a compaction
// keeps may take before their tool results are truncated: the threshold
// less the summary's budget, and after an overflow no more than what
// leaves room under the window less reserveTokens for a summary of one
// estimated token; less extra, the prompt that follows them. ok is false
// when neither bounds them.
func (e *Engine) keptLimit(reason transcript.CompactionReason, extra int, c calibration) (limit int, ok bool) {
	if threshold, budget, bounded := e.summaryBudget(); bounded {
		limit, ok = threshold-budget-extra, true
	}
	if window := e.window(); reason == transcript.ReasonOverflow && window > 0 {
		if usable := window - max(e.cfg.Compaction.ReserveTokens, 0) - c.tokens(1) - extra; usable > 0 && (!ok || usable < limit) {
			limit, ok = usable, true
		}
	}
	return limit, ok
}

// summaryBudget returns the compaction threshold and the most tokens a
// summary may take: a quarter of the threshold. ok is false when there is
// no threshold (the model's context window is unknown, or no larger than
// reserveTokens); then only the summarizer bounds a summary.
func (e *Engine) summaryBudget() (threshold, budget int, ok bool) {
	threshold, ok = transitions.CompactionThreshold(e.model.ContextWindow, e.cfg.Compaction.ReserveTokens)
	if !ok || threshold < 4 {
		return 0, 0, false
	}
	return threshold, threshold / 4, true
}

// summaryLimit is the longest summary, in characters as estimated (bytes),
// that compaction c may leave: the text whose size is the budget, or less
// when what it keeps and the prompt after it leave less room under the
// threshold (failing that, under the window less reserveTokens; unless
// they leave none). Sizes are the session's calibrated count, and when an
// overflow's count sizes the compaction (see overflowCut), that count
// too: the summary fits by both. 0 means no limit.
func (e *Engine) summaryLimit(c *compaction) int {
	threshold, budget, ok := e.summaryBudget()
	if !ok {
		return 0
	}
	limit := func(sizing calibration) int {
		size := sizing.tokens(sizes.Tokens(c.kept...)) + c.extra
		room := threshold - size
		if room <= 0 {
			room = e.model.ContextWindow - max(e.cfg.Compaction.ReserveTokens, 0) - size
		}
		b := budget
		if room > 0 {
			b = min(b, room)
		}
		return max(sizing.chars(b), 1)
	}
	if c.sizing == e.calib {
		return limit(e.calib)
	}
	return min(limit(e.calib), limit(c.sizing))
}

// startCompaction begins an automatic compaction; the machine is in
// compacting. With nothing to compact it ends at once, failed.
func (e *Engine) startCompaction(at time.Time, reason transcript.CompactionReason, willRetry, check bool) {
	e.emit(events.AutoCompactionStart{Reason: reason})
	c, err := e.prepareCompaction(reason)
	if err != nil {
		e.compactionFailed(at, &compaction{reason: reason, willRetry: willRetry, check: check}, err)
		return
	}
	c.willRetry, c.check = willRetry, check
	e.runCompaction(c, "")
}

// startManualCompaction begins Compact's compaction; the machine is in
// compacting. With nothing to compact it ends at once, failed.
func (e *Engine) startManualCompaction(s *step) {
	c, err := e.prepareCompaction(transcript.ReasonManual)
	if err != nil {
		e.compactionFailed(s.at, &compaction{reason: transcript.ReasonManual, manual: true}, err)
		return
	}
	c.manual = true
	e.runCompaction(c, s.instructions)
}

// runCompaction asks the driver for the summary.
func (e *Engine) runCompaction(c *compaction, instructions string) {
	e.comp = c
	e.effect(Effect{Kind: StartCompaction, Compaction: c.id, Request: &SummaryRequest{
		Messages: c.cut, Kept: c.kept, Reason: c.reason, Instructions: instructions, MaxChars: e.summaryLimit(c),
		TokenRatio: float64(e.calib), Model: e.model, Retry: e.cfg.Retry,
	}})
}

// Compact starts a manual compaction with the caller's instructions (the
// table's compact rule): it emits no automatic compaction events and ends
// with FinishCompact. While a run or a compaction is in flight it returns
// ErrBusy and changes nothing; during a retry chain's wait it first ends
// the chain as cancelled (the turn fails with ErrRetryCancelled), then
// compacts. A compaction that ends at once (ErrAlreadyCompacted when
// nothing was added to history since the last compaction,
// ErrNothingToCompact when everything fits in the messages kept) also
// returns its error. The effects are to be carried out whatever the error.
func (e *Engine) Compact(at time.Time, instructions string) ([]Effect, error) {
	e.begin()
	if e.run != nil || e.pending != nil || e.comp != nil {
		return e.end(at), ErrBusy
	}
	f := transitions.Facts{Signal: transitions.CompactCalled, AlreadyCompacted: e.ctx.compactionSeq > 0 && e.ctx.compactionSeq == e.ctx.nextSeq}
	if !e.fire(&step{at: at, facts: f, instructions: wiretext.String(instructions)}) {
		return e.end(at), ErrBusy
	}
	out := e.end(at)
	for _, ef := range out {
		if ef.Kind == FinishCompact {
			return out, ef.Err
		}
	}
	return out, nil
}

// CompactionFinished is the summarizer's answer for compaction id: the
// summary, or why there is none. The compaction's entry goes to history
// (an Append that awaits Appended) before the runtime context changes.
func (e *Engine) CompactionFinished(at time.Time, id CompactionID, sum Summary, err error) []Effect {
	e.begin()
	c := e.comp
	if c == nil || c.id != id || c.committing {
		return e.end(at) // cancelled meanwhile, already reported
	}
	err = wiretext.Error(err)
	if err == nil {
		sum.Text = wiretext.String(sum.Text)
		sum.Details, err = validDetails(sum.Details)
	}
	if err != nil {
		e.comp = nil
		e.compactionFailed(at, c, err)
		return e.end(at)
	}
	if limit := e.summaryLimit(c); limit > 0 {
		sum.Text = capSummary(sum.Text, limit)
	}
	c.entry = transcript.Entry{Type: transcript.EntryCompaction, ID: e.ctx.newID("compaction"), Timestamp: at.UnixMilli(), Compaction: &transcript.Compaction{
		Reason: c.reason, Summary: sum.Text, FirstKeptEntryID: c.kept[0].ID, TokensBefore: c.before, Details: sum.Details,
		Truncated: c.truncated,
	}}
	c.entry.Compaction.TokensAfter = c.sizing.tokens(sizes.Tokens(summaryMessage(c.entry)) + sizes.Tokens(c.kept...))
	c.committing, c.previousSeq = true, e.ctx.compactionSeq
	e.record(c.entry)
	return e.end(at)
}

// committed applies a compaction whose entry was appended (err nil): the
// runtime context becomes the summary, then the kept messages, then
// anything that arrived meanwhile; the compaction reports its result and
// the machine steps on its end.
func (e *Engine) committed(at time.Time, err error) {
	c := e.comp
	e.comp = nil
	if err != nil {
		e.compactionFailed(at, c, fmt.Errorf("%w: %w", ErrHistory, err))
		return
	}
	e.ctx.compact(c.entry, -1)
	e.setOverflow(overflowCount{}) // the context it counted is gone
	res := *c.entry.Compaction     // a copy: the entry went to history
	res.Truncated = slices.Clone(res.Truncated)
	if c.manual {
		e.effect(Effect{Kind: FinishCompact, Result: &res})
	} else {
		e.emit(events.AutoCompactionEnd{Result: &res, Aborted: false, WillRetry: c.willRetry})
	}
	e.fire(&step{at: at, facts: transitions.Facts{Signal: transitions.CompactionEnded, Compacted: true, WillRetry: c.willRetry}})
}

// compactionFailed reports a compaction that ended without a result, and
// why, and steps the machine on its end.
func (e *Engine) compactionFailed(at time.Time, c *compaction, err error) {
	switch {
	case c.manual:
		e.effect(Effect{Kind: FinishCompact, Err: err})
	case c.reason == transcript.ReasonOverflow:
		msg := "Context overflow recovery failed: " + err.Error()
		e.emit(events.AutoCompactionEnd{Aborted: false, WillRetry: false, ErrorMessage: msg})
		e.recordCompactionFailed(at, c.reason, msg)
	default:
		msg := "Auto-compaction failed: " + err.Error()
		e.emit(events.AutoCompactionEnd{Aborted: false, WillRetry: false, ErrorMessage: msg})
		e.recordCompactionFailed(at, c.reason, msg)
	}
	e.raise(step{at: at, err: err, facts: transitions.Facts{Signal: transitions.CompactionEnded, WillRetry: c.willRetry}})
}

// AbortCompaction cancels the compaction in flight, automatic or manual.
// With none in flight it does nothing.
func (e *Engine) AbortCompaction(at time.Time) []Effect {
	e.begin()
	f := transitions.Facts{Signal: transitions.AbortCompactionCalled, Committing: e.comp != nil && e.comp.committing}
	e.fire(&step{at: at, facts: f})
	return e.end(at)
}

// cancelCompaction cancels c and reports it as aborted. A compaction whose
// entry is being appended is past cancelling: it ends when the append does.
func (e *Engine) cancelCompaction(c *compaction) {
	if c.committing {
		return
	}
	e.comp = nil
	e.effect(Effect{Kind: CancelCompaction, Compaction: c.id})
	if c.manual {
		e.effect(Effect{Kind: FinishCompact, Err: ErrCompactionCancelled})
		return
	}
	e.emit(events.AutoCompactionEnd{Aborted: true, WillRetry: false})
	if c.willRetry {
		e.failTurn(fmt.Errorf("%w: %w", ErrOverflow, ErrCompactionCancelled))
	}
}
