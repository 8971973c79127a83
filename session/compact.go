package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentfsm/agentfsm/transitions"
)

// prepareCompaction chooses what a compaction cuts (policy §4.4): it
// returns the job with its cut and kept messages, or false when there is
// nothing to compact.
//
// When the session has a compaction threshold, a compaction makes room for
// a summary of the budget's size: if the messages kept would take more
// than the threshold less the budget, it cuts deeper, at a later valid cut
// point (the last one at most). That holds too when keepRecentTokens would
// keep everything after the first message, and then a summary over the
// budget in first place (written before there was one, or by another
// summarizer) is summarized again.
func (s *Session) prepareCompaction(reason CompactionReason) (*compactionJob, bool) {
	l := &s.loop
	at, ok := cutPoint(l.runtime, l.cfg.Compaction.KeepRecentTokens)
	if threshold, budget, bounded := s.summaryBudget(); bounded {
		if ok {
			at = deeperCut(l.runtime, at, threshold-budget)
		} else if first, found := nextCutPoint(l.runtime, 1); found {
			at = deeperCut(l.runtime, first, threshold-budget)
			ok = at > first || (l.runtime[0].Role == RoleSummary && estimateTokens(l.runtime[0]) > budget)
		}
	}
	if !ok {
		return nil, false
	}
	l.ids++
	return &compactionJob{
		id:     l.ids,
		reason: reason,
		cut:    cloneMessages(l.runtime[:at]),
		kept:   cloneMessages(l.runtime[at:]),
		before: tokensBefore(l.runtime),
	}, true
}

// startCompaction begins an automatic compaction; the machine is in
// compacting. check marks the compaction of the check before a prompt,
// which never fails the turn: the turn's outcome is its own run's.
func (s *Session) startCompaction(reason CompactionReason, willRetry, check bool) {
	s.emit(AutoCompactionStart{Reason: reason})
	j, ok := s.prepareCompaction(reason)
	if !ok {
		j = &compactionJob{reason: reason, check: check}
		s.endJobFailed(j, ErrNothingToCompact)
		return
	}
	j.willRetry = willRetry
	j.check = check
	s.runJob(j, "")
}

// endJobFailed reports an automatic compaction that ended without a
// result, and why; an overflow recovery that failed fails the turn.
func (s *Session) endJobFailed(j *compactionJob, err error) {
	prefix := "Auto-compaction failed: "
	if j.reason == ReasonOverflow {
		prefix = "Context overflow recovery failed: "
		if !j.check {
			s.failTurn(fmt.Errorf("%w: %w", ErrOverflow, err))
		}
	}
	s.emit(AutoCompactionEnd{Aborted: false, WillRetry: false, ErrorMessage: prefix + err.Error()})
	s.step(transitions.Facts{Signal: transitions.CompactionEnded})
}

// compactNow runs a manual compaction (Compact): no machine transition and
// no automatic events; reply gets the result.
func (s *Session) compactNow(instructions string, reply func(CompactionResult, error)) {
	l := &s.loop
	if l.turn != nil || l.run != nil || l.job != nil {
		reply(CompactionResult{}, ErrBusy)
		return
	}
	if l.compactionSeq > 0 && l.compactionSeq == l.nextSeq {
		// Nothing was added to history since the last compaction.
		reply(CompactionResult{}, ErrAlreadyCompacted)
		return
	}
	j, ok := s.prepareCompaction(ReasonManual)
	if !ok {
		reply(CompactionResult{}, ErrNothingToCompact)
		return
	}
	j.manual = reply
	s.runJob(j, instructions)
}

// runJob runs the summarizer on its own goroutine; the answer comes back to
// the loop through post.
func (s *Session) runJob(j *compactionJob, instructions string) {
	ctx, cancel := context.WithCancelCause(context.Background())
	j.cancel = cancel
	s.loop.job = j
	req := SummaryRequest{Messages: j.cut, Kept: j.kept, Reason: j.reason, Instructions: instructions, MaxChars: s.summaryLimit(j.kept)}
	go func() {
		sum, err := s.summarize(ctx, req)
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		cancel(nil)
		s.post(func() { s.onJobDone(j.id, sum, err) })
	}()
}

// summarize calls the summarizer, turning a panic into a *panicError.
func (s *Session) summarize(ctx context.Context, req SummaryRequest) (sum Summary, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = recovered("summarizer", r, s.logger)
		}
	}()
	return s.summarizer.Summarize(ctx, req)
}

// onJobDone applies a finished compaction: the history entry, the rebuilt
// runtime context, the end event, and the continuation after an overflow.
func (s *Session) onJobDone(id int, sum Summary, err error) {
	l := &s.loop
	j := l.job
	if j == nil || j.id != id {
		return // aborted meanwhile, already reported
	}
	l.job = nil
	if errors.Is(err, errCompactionAborted) {
		// Cancelled by AbortCompaction or Abort, which reported it.
		return
	}
	var res CompactionResult
	if err == nil {
		res, err = s.applyCompaction(j, sum)
	}
	if j.manual != nil {
		j.manual(res, err)
		return
	}
	if err != nil {
		s.endJobFailed(j, err)
		return
	}
	s.emit(AutoCompactionEnd{Result: &res, Aborted: false, WillRetry: j.willRetry})
	tr, ok := s.step(transitions.Facts{Signal: transitions.CompactionEnded, Compacted: true, WillRetry: j.willRetry})
	if ok && tr.Event == transitions.Resume {
		s.startRun(nil)
	}
}

// applyCompaction appends the compaction entry to history and rebuilds the
// runtime context: the summary, then the kept messages, then anything that
// arrived meanwhile. A summary longer than the request's MaxChars is cut to
// its end first.
func (s *Session) applyCompaction(j *compactionJob, sum Summary) (CompactionResult, error) {
	l := &s.loop
	if len(j.kept) == 0 {
		return CompactionResult{}, ErrNothingToCompact
	}
	if limit := s.summaryLimit(j.kept); limit > 0 {
		sum.Text = capSummary(sum.Text, limit)
	}
	res := CompactionResult{Summary: sum.Text, FirstKeptEntryID: j.kept[0].ID, TokensBefore: j.before, Details: sum.Details}
	e := Entry{Type: EntryCompaction, ID: s.newID("compaction"), Timestamp: nowMs(), Compaction: &Compaction{
		Reason: j.reason, Summary: sum.Text, FirstKeptEntryID: res.FirstKeptEntryID, TokensBefore: res.TokensBefore,
	}}
	if err := s.record(e); err != nil {
		return CompactionResult{}, fmt.Errorf("writing history: %w", err)
	}
	first := -1
	for i, m := range l.runtime {
		if m.ID == res.FirstKeptEntryID {
			first = i
			break
		}
	}
	rest := []Message(nil)
	if first >= 0 {
		rest = l.runtime[first:]
	}
	l.runtime = append([]Message{summaryMessage(e)}, rest...)
	return res, nil
}

// summaryBudget returns the compaction threshold and the most tokens a
// summary may take: a quarter of the threshold. ok is false when there is
// no threshold (the model's context window is unknown, or no larger than
// reserveTokens); then only the summarizer bounds a summary.
func (s *Session) summaryBudget() (threshold, budget int, ok bool) {
	threshold, ok = transitions.CompactionThreshold(s.model.ContextWindow, s.loop.cfg.Compaction.ReserveTokens)
	if !ok || threshold < 4 {
		return 0, 0, false
	}
	return threshold, threshold / 4, true
}

// summaryLimit is the longest summary, in characters as estimated (bytes),
// that a compaction keeping kept may leave: the budget, or less when kept
// leaves less room under the threshold (unless it leaves none). 0 means no
// limit.
func (s *Session) summaryLimit(kept []Message) int {
	threshold, budget, ok := s.summaryBudget()
	if !ok {
		return 0
	}
	room := threshold
	for _, m := range kept {
		room -= estimateTokens(m)
	}
	if room > 0 {
		budget = min(budget, room)
	}
	return budget * 4
}
