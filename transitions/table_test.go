package transitions_test

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/states"
	tr "github.com/agentfsm/agentfsm/transitions"
)

// specNext is §5 of the policy written out by hand, independently of the
// guards in the table: the trigger the specification names for a state and the
// facts, the actions its rule performs, or false when the occurrence
// changes nothing.
func specNext(s states.State, f tr.Facts) (tr.Trigger, []tr.Action, bool) {
	retryable := f.Class == classify.Retryable || f.Class == classify.UsageLimit
	w := f.ContextWindow
	over := w > 0 && f.Tokens > w-max(w*15/100, f.ReserveTokens)
	switch s {
	case states.Idle, states.Continuing:
		switch f.Signal {
		case tr.RunEnded:
			// Issue 25 §2: a shared limit held the run; it made no call.
			if f.SharedHoldMs > 0 {
				return tr.WaitShared, []tr.Action{tr.ScheduleSharedWait}, true
			}
			if !f.Started {
				return tr.StartFailed, []tr.Action{tr.EndChainFailed, tr.FailTurnStartFailed}, true
			}
			return tr.AgentEnd, nil, true
		case tr.Replied:
			if !f.Error && !f.Aborted {
				return tr.Reply, []tr.Action{tr.ClearEpisode, tr.EndChainRecovered}, true
			}
		case tr.AbortCalled:
			if s == states.Idle {
				return tr.Abort, []tr.Action{tr.FailTurnAborted, tr.CancelRun, tr.DropPrompt}, true
			}
			return tr.Cancel, cancelActions, true
		case tr.CompactCalled:
			if s == states.Idle {
				return compact(f)
			}
		case tr.TurnStarted:
			// Issue 25 §1: a turn that starts on a fallback model after
			// its cooldown goes back to the primary.
			if s == states.Idle && f.OnFallback && f.CooldownOver {
				return tr.Revert, []tr.Action{tr.RevertModel}, true
			}
		case tr.PromptCheck:
			if s != states.Idle {
				break
			}
			// §4.6: a prompt that alone cannot fit the window is not sent,
			// whatever the settings.
			if f.PromptTooLarge {
				return tr.CheckTooLarge, []tr.Action{tr.ReportTooLarge, tr.DropPrompt, tr.FailTurnTooLarge}, true
			}
			// Otherwise the check before a prompt is the compaction check
			// only, and takes a transition only when it compacts.
			if !f.CompactionEnabled {
				break
			}
			if !f.Stale && f.Class == classify.Overflow && f.SameModel {
				if !f.EpisodeCompacted {
					return tr.CheckOverflow, []tr.Action{tr.RemoveFailed, tr.StartCheckOverflowCompaction}, true
				}
			} else if errorLike := f.Error || retryable || f.Class == classify.Fatal; !f.Stale && !errorLike && over {
				return tr.CheckThreshold, []tr.Action{tr.StartCheckThresholdCompaction}, true
			}
			// The context with the prompt would not fit the window.
			if f.PromptOverWindow {
				return tr.CheckRoom, []tr.Action{tr.StartCheckThresholdCompaction}, true
			}
		}
	case states.Classifying:
		switch f.Signal {
		case tr.AbortCalled:
			return tr.Cancel, cancelActions, true
		case tr.RunEnded, tr.CredentialAnswered:
		default:
			return "", nil, false // classifying decides on a run's end only
		}
		// §3.6: a usage limit asks the credential store first.
		if f.Signal == tr.RunEnded && f.UsageLimit && f.CredentialStore {
			return tr.AskCredentials, []tr.Action{tr.AskCredentialStore}, true
		}
		// Issue 25 §1: with a next model in the fallback list, a retryable
		// error switches to it where the chain would end (retries off, out
		// of retries, of budget, a hint over the cap, a reset too far), at a
		// usage limit no credential switch answered, and at an overload
		// with fallback.after "overloaded". The switch compacts first when
		// the context is over the next model's threshold.
		if retryable && f.FallbackAvailable {
			countLeft := f.MaxRetries < 0 || f.Attempt < f.MaxRetries
			delay := f.DelayMs
			if f.CredentialSwitched {
				delay = 0
			}
			inBudget := f.MaxElapsedMs <= 0 || new(big.Int).Add(big.NewInt(max(f.ElapsedMs, 0)), big.NewInt(max(delay, 0))).Cmp(big.NewInt(f.MaxElapsedMs)) <= 0
			resetWait := countLeft && !f.CredentialSwitched && (f.UsageLimit || f.HintOverCap) && f.WaitForReset && f.ResetKnown
			// A later wait for a reset that would end past the budget ends
			// the chain too (issue 24 §2).
			resetPastBudget := f.ResetWaited && f.MaxElapsedMs > 0 &&
				new(big.Int).Add(big.NewInt(max(f.ElapsedMs, 0)), big.NewInt(max(f.ResetInMs, 0))).Cmp(big.NewInt(f.MaxElapsedMs)) > 0
			ends := !f.RetryEnabled || !countLeft || (resetWait && (!f.ResetWithin || resetPastBudget)) ||
				(!resetWait && ((f.HintOverCap && !f.CredentialSwitched) || !inBudget))
			if ends || (f.UsageLimit && !f.CredentialSwitched) || (f.Overloaded && f.FallbackOnOverload) {
				if f.FallbackTooSmall && f.CompactionEnabled {
					return tr.FallbackCompact, []tr.Action{tr.EndChainFailed, tr.RemoveFailed, tr.SwitchModel, tr.StartOverflowRecovery}, true
				}
				return tr.Fallback, []tr.Action{tr.EndChainFailed, tr.RemoveFailed, tr.SwitchModel, tr.StartContinuation}, true
			}
		}
		// §1 step 1: a retryable error with a retry scheduled (or the chain
		// running out) stops here.
		// The check before a prompt (§4.6) is the compaction check only.
		if retryable && f.RetryEnabled && f.Signal != tr.PromptCheck {
			// Issue 24 §1: maxRetries -1 is no count limit; a time budget
			// ends the chain when the retry would end past it.
			countLeft := f.MaxRetries < 0 || f.Attempt < f.MaxRetries
			delay := f.DelayMs
			if f.CredentialSwitched {
				delay = 0 // the retry goes at once
			}
			within := func(d int64) bool {
				return f.MaxElapsedMs <= 0 || new(big.Int).Add(big.NewInt(max(f.ElapsedMs, 0)), big.NewInt(max(d, 0))).Cmp(big.NewInt(f.MaxElapsedMs)) <= 0
			}
			inBudget := within(delay)
			// Issue 24 §2: a usage limit (or a hint over the cap) whose reset
			// is known waits for it with waitForReset, or fails naming it
			// when it is too far; a credential switch comes first. The
			// chain's first wait has its own bound (maxResetWaitMs); a later
			// one must also end within the time budget, or the budget ends
			// the chain.
			resetWait := countLeft && !f.CredentialSwitched && (f.UsageLimit || f.HintOverCap) && f.WaitForReset && f.ResetKnown
			switch {
			case countLeft && f.CredentialSwitched && inBudget:
				return tr.RetryNow, []tr.Action{tr.ScheduleRetryNow, tr.RemoveFailed}, true
			case resetWait && f.ResetWithin && f.ResetWaited && !within(f.ResetInMs):
				return tr.ExhaustElapsed, []tr.Action{tr.EndChainExhaustedElapsed, tr.FailTurnExhaustedElapsed}, true
			case resetWait && f.ResetWithin:
				return tr.WaitReset, []tr.Action{tr.ScheduleResetWait, tr.RemoveFailed}, true
			case resetWait:
				return tr.ResetTooFar, []tr.Action{tr.EndChainExhaustedReset, tr.FailTurnResetTooFar}, true
			case countLeft && !f.CredentialSwitched && !f.HintOverCap && inBudget:
				return tr.Retry, []tr.Action{tr.ScheduleBackoff, tr.RemoveFailed}, true
			case countLeft && (f.CredentialSwitched || !f.HintOverCap):
				return tr.ExhaustElapsed, []tr.Action{tr.EndChainExhaustedElapsed, tr.FailTurnExhaustedElapsed}, true
			}
			return tr.Exhaust, []tr.Action{tr.EndChainExhausted, tr.FailTurnExhausted}, true
		}
		accept := []tr.Action{tr.EndChainFailed, tr.FailTurnMessage}
		// §4.2 step 3: the overflow path owns a same-model overflow.
		if f.Class == classify.Overflow && f.SameModel {
			switch {
			case f.Stale:
				return tr.Accept, accept, true
			case !f.CompactionEnabled:
				return tr.Unrecovered, []tr.Action{tr.EndChainFailed, tr.FailTurnOverflow}, true
			case f.EpisodeCompacted:
				return tr.Refuse, []tr.Action{tr.EndChainFailed, tr.ReportRefusal, tr.FailTurnOverflow}, true
			case f.TooLarge:
				// No compaction can make it fit (issue 23).
				return tr.TooLarge, []tr.Action{tr.EndChainFailed, tr.ReportTooLarge, tr.FailTurnTooLarge}, true
			}
			return tr.Overflow, []tr.Action{tr.EndChainFailed, tr.MarkEpisode, tr.RemoveFailed, tr.StartOverflowRecovery}, true
		}
		// §4.2 steps 1, 2, 4: aborted (not before a prompt), stale,
		// compaction off, an error: stop.
		if f.Error || retryable || f.Class == classify.Fatal {
			return tr.Accept, accept, true
		}
		if (f.Aborted && f.Signal != tr.PromptCheck) || f.Stale || !f.CompactionEnabled {
			return tr.Accept, accept, true
		}
		// §4.2 step 5.
		if over {
			return tr.Threshold, []tr.Action{tr.EndChainFailed, tr.StartThresholdCompaction}, true
		}
		return tr.Accept, accept, true
	case states.Backoff:
		switch f.Signal {
		case tr.TimerFired:
			if f.CurrentTimer {
				return tr.Elapsed, []tr.Action{tr.StartContinuation}, true
			}
		case tr.AbortRetryCalled:
			return tr.CancelRetry, []tr.Action{tr.StopTimer, tr.EndChainCancelled, tr.FailTurnRetryCancelled}, true
		case tr.AbortCalled:
			return tr.Cancel, cancelActions, true
		case tr.CompactCalled:
			if f.AlreadyCompacted {
				return tr.CompactRefused, []tr.Action{tr.RefuseCompaction}, true
			}
			return tr.CompactInBackoff, []tr.Action{tr.StopTimer, tr.EndChainCancelled, tr.FailTurnRetryCancelled, tr.StartManualCompaction}, true
		}
	case states.Compacting:
		switch f.Signal {
		case tr.CompactionEnded:
			switch {
			case f.Compacted && f.WillRetry:
				return tr.Resume, []tr.Action{tr.StartContinuation}, true
			case f.WillRetry:
				return tr.RecoveryFailed, []tr.Action{tr.FailTurnRecoveryFailed}, true
			}
			return tr.CompactionEnd, nil, true
		case tr.AbortCalled:
			return tr.Cancel, cancelActions, true
		case tr.AbortCompactionCalled:
			if !f.Committing {
				return tr.CancelCompaction, []tr.Action{tr.StopCompaction}, true
			}
		}
	case states.Exhausted, states.Cancelled:
		return tr.Reset, nil, true
	}
	return "", nil, false
}

// cancelActions are what Abort does wherever something is in flight.
var cancelActions = []tr.Action{tr.FailTurnAborted, tr.CancelRun, tr.DropDecision, tr.StopTimer, tr.EndChainCancelled, tr.StopCompaction, tr.DropPrompt}

// compact is Compact() in idle.
func compact(f tr.Facts) (tr.Trigger, []tr.Action, bool) {
	if f.AlreadyCompacted {
		return tr.CompactRefused, []tr.Action{tr.RefuseCompaction}, true
	}
	return tr.Compact, []tr.Action{tr.StartManualCompaction}, true
}

// applies reports whether r applies in state s with facts f.
func applies(r tr.Rule, s states.State, f *tr.Facts) bool {
	return slices.Contains(r.From, s) && r.Guard.Holds(s, f)
}

// checkAgainstSpec fails t unless exactly the rule the specification names
// applies, with the specification's actions.
func checkAgainstSpec(t interface{ Fatalf(string, ...any) }, rules tr.Rules, s states.State, f *tr.Facts) {
	var holding []tr.Trigger
	for _, r := range rules {
		if applies(r, s, f) {
			holding = append(holding, r.Trigger)
		}
	}
	want, actions, ok := specNext(s, *f)
	got, gotOK := rules.Next(s, f)
	if len(holding) > 1 || ok != gotOK || (ok && (got.Trigger != want || holding[0] != want || !slices.Equal(got.Actions, actions))) {
		t.Fatalf("state %s, facts %+v: rules holding %v, Next %v %v/%v, spec names %q %v/%v",
			s, f, holding, got.Trigger, got.Actions, gotOK, want, actions, ok)
	}
}

// numbers are representative values around each numeric threshold.
var numbers = []struct {
	attempt, maxRetries, tokens, window, reserve int
	elapsed, delay, budget                       int64
}{
	{0, 3, 170000, 200000, 16384, 0, 2000, 0},
	{2, 3, 170001, 200000, 16384, 0, 0, 0},
	{3, 3, 170001, 200000, 16384, 0, 0, 0},
	{4, 3, 170000, 200000, 16384, 0, 0, 0},
	{0, 0, 33617, 50000, 16384, 0, 0, 0}, // reserve above 15%: threshold 33,616
	{0, 0, 33616, 50000, 16384, 0, 0, 0},
	{1, 6, 1 << 40, 0, 16384, 0, 0, 0}, // unknown window: never over
	// Issue 24 §1: a time budget, with and without a count limit, around
	// its edge (elapsed + delay = budget fits, one more does not).
	{5, -1, 170000, 200000, 16384, 1000, 59000, 60000},
	{5, -1, 170000, 200000, 16384, 1001, 59000, 60000},
	{1, 3, 170000, 200000, 16384, 60000, 0, 60000},
	{1, 3, 170000, 200000, 16384, 60001, 0, 60000},
	{3, 3, 170000, 200000, 16384, 60001, 0, 60000}, // both limits: the count's rule
	{9999, -1, 170000, 200000, 16384, math.MaxInt64, math.MaxInt64, math.MaxInt64},
}

// TestExhaustive checks every state against every signal, class and
// combination of the boolean facts, with numbers around each threshold: at
// most one rule applies, it is the one §5 names with the actions it names,
// and in classifying exactly one applies. The facts that only one signal
// reads vary with that signal (TestRandomFactsPickTheSpecRule varies them
// all). Under the race detector it checks one combination in
// exhaustiveStride, and still takes every rule; .ci/run checks them all
// without it.
func TestExhaustive(t *testing.T) {
	const nBools = 12
	rules := tr.Table()
	checked, seen := 0, 0
	taken := map[tr.Trigger]bool{}
	// The facts of each combination, in one variable: the guards take
	// them by pointer, and one made in the loop would be one allocation
	// for each of 90 million combinations.
	var f tr.Facts
	for _, s := range states.All() {
		for _, sig := range tr.Signals() {
			extra := 0
			switch sig {
			case tr.RunEnded:
				extra = 3 // Started, UsageLimit, CredentialStore
			case tr.CompactCalled, tr.AbortCompactionCalled:
				extra = 1 // AlreadyCompacted, Committing
			}
			// The numbers matter to a decision only (a run's end, the
			// store's answer, the check before a prompt): other signals
			// take one row of them.
			rows := numbers
			switch sig {
			case tr.RunEnded, tr.CredentialAnswered, tr.PromptCheck:
			default:
				rows = numbers[:1]
			}
			for _, c := range tr.Classes() {
				// Facts that matter to one kind of decision vary there only:
				// the reset's (issue 24) and FallbackAvailable (issue 25) on a
				// retryable error, TooLarge on an overflow, the prompt's size
				// (issue 23) before a prompt, the fallback's cooldown at a
				// turn's start, the shared limit's hold on a run that made
				// no call. The other facts of the fallback take facts a
				// decision on a retryable error does not read (SameModel,
				// Stale, EpisodeCompacted): TestRandomFactsPickTheSpecRule
				// draws them all independently.
				variants, vary := 1, func(*tr.Facts, int) {}
				switch {
				case s == states.Classifying && (sig == tr.RunEnded || sig == tr.CredentialAnswered) && (c == classify.Retryable || c == classify.UsageLimit):
					variants, vary = 64, func(f *tr.Facts, r int) {
						f.WaitForReset, f.ResetKnown, f.ResetWithin, f.ResetWaited = r&1 != 0, r&2 != 0, r&4 != 0, r&8 != 0
						if r&16 != 0 {
							f.ResetInMs = 3_600_000 // past every budget of the rows but the largest
						}
						fa := r&32 != 0
						f.FallbackAvailable, f.FallbackOnOverload, f.Overloaded, f.FallbackTooSmall = fa, fa && f.SameModel, fa && f.Stale, fa && f.EpisodeCompacted
					}
				case sig == tr.RunEnded && c == classify.Overflow:
					variants, vary = 2, func(f *tr.Facts, r int) { f.TooLarge = r&1 != 0 }
				case sig == tr.RunEnded && c == classify.None:
					// A run a shared limit held (issue 25 §2) made no call.
					variants, vary = 2, func(f *tr.Facts, r int) { f.SharedHoldMs = int64(r) * 2000 }
				case sig == tr.PromptCheck:
					variants, vary = 4, func(f *tr.Facts, r int) { f.PromptTooLarge, f.PromptOverWindow = r&1 != 0, r&2 != 0 }
				case sig == tr.TurnStarted:
					variants, vary = 4, func(f *tr.Facts, r int) { f.OnFallback, f.CooldownOver = r&1 != 0, r&2 != 0 }
				}
				for bits := range 1 << (nBools + extra) {
					for _, n := range rows {
						for r := range variants {
							// The combinations skipped under the race
							// detector are skipped before they are built:
							// building all 90 million took more time
							// than checking one in exhaustiveStride.
							seen++
							if seen%exhaustiveStride != 0 {
								continue
							}
							more := bits >> nBools
							f = tr.Facts{
								Signal: sig, Class: c,
								Error: bits&1 != 0, Aborted: bits&2 != 0, RetryEnabled: bits&4 != 0,
								HintOverCap: bits&8 != 0, CompactionEnabled: bits&16 != 0, SameModel: bits&32 != 0,
								Stale: bits&64 != 0, EpisodeCompacted: bits&128 != 0, Compacted: bits&256 != 0,
								WillRetry: bits&512 != 0, CurrentTimer: bits&1024 != 0, CredentialSwitched: bits&2048 != 0,
								Started: more&1 != 0, UsageLimit: more&2 != 0, CredentialStore: more&4 != 0,
								AlreadyCompacted: more&1 != 0, Committing: more&1 != 0,
								Attempt: n.attempt, MaxRetries: n.maxRetries,
								ElapsedMs: n.elapsed, DelayMs: n.delay, MaxElapsedMs: n.budget,
								Tokens: n.tokens, ContextWindow: n.window, ReserveTokens: n.reserve,
							}
							vary(&f, r)
							checkAgainstSpec(t, rules, s, &f)
							checked++
							if r, ok := rules.Next(s, &f); ok {
								taken[r.Trigger] = true
							}
						}
					}
				}
			}
		}
	}
	t.Logf("checked %d of %d (state, facts) combinations", checked, seen)
	// One in exhaustiveStride still reaches every rule.
	for _, r := range rules {
		if !taken[r.Trigger] {
			t.Errorf("no combination checked takes %s", r.Trigger)
		}
	}
}

// TestNextEveryStateAndTrigger walks every (state, trigger) pair of the table
// with facts that select it, and the occurrences that change nothing.
func TestNextEveryStateAndTrigger(t *testing.T) {
	base := tr.Facts{RetryEnabled: true, CompactionEnabled: true, MaxRetries: 3, ContextWindow: 200000, ReserveTokens: 16384, SameModel: true}
	with := func(mod func(*tr.Facts)) tr.Facts { f := base; mod(&f); return f }
	ended := func(mod func(*tr.Facts)) tr.Facts {
		return with(func(f *tr.Facts) { f.Signal, f.Started = tr.RunEnded, true; mod(f) })
	}
	cases := []struct {
		name  string
		from  states.State
		facts tr.Facts
		want  tr.Trigger // "" when nothing applies
		to    states.State
	}{
		{"a user's run ends", states.Idle, ended(func(*tr.Facts) {}), tr.AgentEnd, states.Classifying},
		{"a user's run could not start", states.Idle, with(func(f *tr.Facts) { f.Signal = tr.RunEnded }), tr.StartFailed, states.Idle},
		{"a user's run replies", states.Idle, with(func(f *tr.Facts) { f.Signal = tr.Replied }), tr.Reply, states.Idle},
		{"a user's run replies with an error", states.Idle, with(func(f *tr.Facts) { f.Signal, f.Error = tr.Replied, true }), "", ""},
		{"check before a prompt, nothing to do", states.Idle, with(func(f *tr.Facts) { f.Signal = tr.PromptCheck }), "", ""},
		{"check before a prompt, overflow", states.Idle, with(func(f *tr.Facts) { f.Signal, f.Class, f.Error = tr.PromptCheck, classify.Overflow, true }), tr.CheckOverflow, states.Compacting},
		{"check before a prompt, over the threshold", states.Idle, with(func(f *tr.Facts) { f.Signal, f.Tokens = tr.PromptCheck, 170001 }), tr.CheckThreshold, states.Compacting},
		{"check before a prompt, aborted over the threshold", states.Idle, with(func(f *tr.Facts) { f.Signal, f.Tokens, f.Aborted = tr.PromptCheck, 170001, true }), tr.CheckThreshold, states.Compacting},
		{"check before a prompt, the prompt would not fit", states.Idle, with(func(f *tr.Facts) { f.Signal, f.PromptOverWindow = tr.PromptCheck, true }), tr.CheckRoom, states.Compacting},
		{"check before a prompt, stale, the prompt would not fit", states.Idle, with(func(f *tr.Facts) { f.Signal, f.Stale, f.PromptOverWindow = tr.PromptCheck, true, true }), tr.CheckRoom, states.Compacting},
		{"check before a prompt, the prompt would not fit, compaction off", states.Idle, with(func(f *tr.Facts) {
			f.Signal, f.PromptOverWindow, f.CompactionEnabled = tr.PromptCheck, true, false
		}), "", ""},
		{"check before a prompt, the prompt alone too large", states.Idle, with(func(f *tr.Facts) {
			f.Signal, f.PromptTooLarge, f.PromptOverWindow, f.CompactionEnabled = tr.PromptCheck, true, true, false
		}), tr.CheckTooLarge, states.Idle},
		{"check before a prompt, overflow, the prompt alone too large", states.Idle, with(func(f *tr.Facts) {
			f.Signal, f.Class, f.Error, f.PromptTooLarge = tr.PromptCheck, classify.Overflow, true, true
		}), tr.CheckTooLarge, states.Idle},
		{"check before a prompt, retryable", states.Idle, with(func(f *tr.Facts) { f.Signal, f.Class, f.Error = tr.PromptCheck, classify.Retryable, true }), "", ""},
		{"a continuation ends", states.Continuing, ended(func(*tr.Facts) {}), tr.AgentEnd, states.Classifying},
		{"a continuation could not start", states.Continuing, with(func(f *tr.Facts) { f.Signal = tr.RunEnded }), tr.StartFailed, states.Idle},
		{"a continuation replies", states.Continuing, with(func(f *tr.Facts) { f.Signal = tr.Replied }), tr.Reply, states.Continuing},
		{"usage limit, a store to ask", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.UsageLimit, f.CredentialStore = classify.UsageLimit, true, true, true
		}), tr.AskCredentials, states.Classifying},
		{"usage limit, the store switched", states.Classifying, with(func(f *tr.Facts) {
			f.Signal, f.Class, f.Error, f.UsageLimit, f.CredentialStore, f.CredentialSwitched = tr.CredentialAnswered, classify.UsageLimit, true, true, true, true
		}), tr.RetryNow, states.Backoff},
		{"usage limit, the store did not switch", states.Classifying, with(func(f *tr.Facts) {
			f.Signal, f.Class, f.Error, f.UsageLimit, f.CredentialStore = tr.CredentialAnswered, classify.UsageLimit, true, true, true
		}), tr.Retry, states.Backoff},
		{"retryable, attempts left", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.Error, f.Attempt = classify.Retryable, true, 2 }), tr.Retry, states.Backoff},
		{"usage limit retries", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.Error = classify.UsageLimit, true }), tr.Retry, states.Backoff},
		{"retryable, no attempts left", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.Error, f.Attempt = classify.Retryable, true, 3 }), tr.Exhaust, states.Exhausted},
		{"retryable, no count limit, within the budget", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.Attempt, f.MaxRetries, f.ElapsedMs, f.DelayMs, f.MaxElapsedMs = classify.Retryable, true, 40, -1, 1000, 59000, 60000
		}), tr.Retry, states.Backoff},
		{"retryable, the delay would end past the budget", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.Attempt, f.MaxRetries, f.ElapsedMs, f.DelayMs, f.MaxElapsedMs = classify.Retryable, true, 40, -1, 1001, 59000, 60000
		}), tr.ExhaustElapsed, states.Exhausted},
		{"retryable, hint over the cap", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.Error, f.HintOverCap = classify.Retryable, true, true }), tr.Exhaust, states.Exhausted},
		{"usage limit, its reset known and near, waitForReset", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.UsageLimit, f.WaitForReset, f.ResetKnown, f.ResetWithin = classify.UsageLimit, true, true, true, true, true
		}), tr.WaitReset, states.Backoff},
		{"usage limit, its reset too far", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.UsageLimit, f.WaitForReset, f.ResetKnown = classify.UsageLimit, true, true, true, true
		}), tr.ResetTooFar, states.Exhausted},
		{"rate limit, hint over the cap, its reset near, waitForReset", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.HintOverCap, f.WaitForReset, f.ResetKnown, f.ResetWithin = classify.Retryable, true, true, true, true, true
		}), tr.WaitReset, states.Backoff},
		{"usage limit, reset near, waitForReset off", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.UsageLimit, f.ResetKnown, f.ResetWithin = classify.UsageLimit, true, true, true, true
		}), tr.Retry, states.Backoff},
		{"usage limit, reset unknown, waitForReset", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.UsageLimit, f.WaitForReset = classify.UsageLimit, true, true, true
		}), tr.Retry, states.Backoff},
		{"usage limit, reset near, the store switched: no wait", states.Classifying, with(func(f *tr.Facts) {
			f.Signal, f.Class, f.Error, f.UsageLimit, f.CredentialStore, f.CredentialSwitched = tr.CredentialAnswered, classify.UsageLimit, true, true, true, true
			f.WaitForReset, f.ResetKnown, f.ResetWithin = true, true, true
		}), tr.RetryNow, states.Backoff},
		{"usage limit, reset near, no attempts left", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.UsageLimit, f.WaitForReset, f.ResetKnown, f.ResetWithin, f.Attempt = classify.UsageLimit, true, true, true, true, true, 3
		}), tr.Exhaust, states.Exhausted},
		{"retryable, retry off", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.Error, f.RetryEnabled = classify.Retryable, true, false }), tr.Accept, states.Idle},
		{"overload, fallback after overloaded", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.Overloaded, f.FallbackOnOverload, f.FallbackAvailable = classify.Retryable, true, true, true, true
		}), tr.Fallback, states.Continuing},
		{"overload, fallback after exhausted: the chain goes on", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.Overloaded, f.FallbackAvailable = classify.Retryable, true, true, true
		}), tr.Retry, states.Backoff},
		{"overload, fallback after overloaded, the end of the list", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.Overloaded, f.FallbackOnOverload = classify.Retryable, true, true, true
		}), tr.Retry, states.Backoff},
		{"retryable, no attempts left, a fallback", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.Attempt, f.FallbackAvailable = classify.Retryable, true, 3, true
		}), tr.Fallback, states.Continuing},
		{"retryable, no attempts left, a fallback too small", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.Attempt, f.FallbackAvailable, f.FallbackTooSmall = classify.Retryable, true, 3, true, true
		}), tr.FallbackCompact, states.Compacting},
		{"retryable, no attempts left, a fallback too small, compaction off", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.Attempt, f.FallbackAvailable, f.FallbackTooSmall, f.CompactionEnabled = classify.Retryable, true, 3, true, true, false
		}), tr.Fallback, states.Continuing},
		{"retryable, past the budget, a fallback", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.Attempt, f.MaxRetries, f.ElapsedMs, f.DelayMs, f.MaxElapsedMs, f.FallbackAvailable = classify.Retryable, true, 40, -1, 1001, 59000, 60000, true
		}), tr.Fallback, states.Continuing},
		{"retryable, hint over the cap, a fallback", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.HintOverCap, f.FallbackAvailable = classify.Retryable, true, true, true
		}), tr.Fallback, states.Continuing},
		{"usage limit, its reset too far, a fallback", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.UsageLimit, f.WaitForReset, f.ResetKnown, f.FallbackAvailable = classify.UsageLimit, true, true, true, true, true
		}), tr.Fallback, states.Continuing},
		{"usage limit, no store, a fallback", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.UsageLimit, f.FallbackAvailable = classify.UsageLimit, true, true, true
		}), tr.Fallback, states.Continuing},
		{"usage limit, the store switched nothing, a fallback", states.Classifying, with(func(f *tr.Facts) {
			f.Signal, f.Class, f.Error, f.UsageLimit, f.CredentialStore, f.FallbackAvailable = tr.CredentialAnswered, classify.UsageLimit, true, true, true, true
		}), tr.Fallback, states.Continuing},
		{"usage limit, the store switched, a fallback: the key first", states.Classifying, with(func(f *tr.Facts) {
			f.Signal, f.Class, f.Error, f.UsageLimit, f.CredentialStore, f.CredentialSwitched, f.FallbackAvailable = tr.CredentialAnswered, classify.UsageLimit, true, true, true, true, true
		}), tr.RetryNow, states.Backoff},
		{"usage limit, a store not asked yet, a fallback: ask first", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.UsageLimit, f.CredentialStore, f.FallbackAvailable = classify.UsageLimit, true, true, true, true
		}), tr.AskCredentials, states.Classifying},
		{"retryable, retry off, a fallback", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.RetryEnabled, f.FallbackAvailable = classify.Retryable, true, false, true
		}), tr.Fallback, states.Continuing},
		{"fatal, a fallback: nothing falls back", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.FallbackAvailable, f.Overloaded, f.FallbackOnOverload = classify.Fatal, true, true, true, true
		}), tr.Accept, states.Idle},
		{"a turn starts on a fallback, its cooldown over", states.Idle, with(func(f *tr.Facts) { f.Signal, f.OnFallback, f.CooldownOver = tr.TurnStarted, true, true }), tr.Revert, states.Idle},
		{"a turn starts on a fallback, its cooldown not over", states.Idle, with(func(f *tr.Facts) { f.Signal, f.OnFallback = tr.TurnStarted, true }), "", ""},
		{"a turn starts on the primary", states.Idle, with(func(f *tr.Facts) { f.Signal, f.CooldownOver = tr.TurnStarted, true }), "", ""},
		{"overflow", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.Error = classify.Overflow, true }), tr.Overflow, states.Compacting},
		{"silent overflow", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.Tokens = classify.Overflow, 250000 }), tr.Overflow, states.Compacting},
		{"overflow too large to fit", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.Error, f.TooLarge = classify.Overflow, true, true }), tr.TooLarge, states.Idle},
		{"overflow too large, episode compacted", states.Classifying, ended(func(f *tr.Facts) {
			f.Class, f.Error, f.TooLarge, f.EpisodeCompacted = classify.Overflow, true, true, true
		}), tr.Refuse, states.Idle},
		{"check before a prompt, overflow, too large is not read", states.Idle, with(func(f *tr.Facts) {
			f.Signal, f.Class, f.Error, f.TooLarge = tr.PromptCheck, classify.Overflow, true, true
		}), tr.CheckOverflow, states.Compacting},
		{"overflow, episode compacted", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.Error, f.EpisodeCompacted = classify.Overflow, true, true }), tr.Refuse, states.Idle},
		{"overflow, compaction off", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.Error, f.CompactionEnabled = classify.Overflow, true, false }), tr.Unrecovered, states.Idle},
		{"overflow, stale", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.Error, f.Stale = classify.Overflow, true, true }), tr.Accept, states.Idle},
		{"overflow from another model", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.Error, f.SameModel = classify.Overflow, true, false }), tr.Accept, states.Idle},
		{"silent overflow from another model", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.SameModel, f.Tokens = classify.Overflow, false, 250000 }), tr.Threshold, states.Compacting},
		{"over the threshold", states.Classifying, ended(func(f *tr.Facts) { f.Tokens = 170001 }), tr.Threshold, states.Compacting},
		{"at the threshold", states.Classifying, ended(func(f *tr.Facts) { f.Tokens = 170000 }), tr.Accept, states.Idle},
		{"over, window unknown", states.Classifying, ended(func(f *tr.Facts) { f.Tokens, f.ContextWindow = 170001, 0 }), tr.Accept, states.Idle},
		{"over, aborted", states.Classifying, ended(func(f *tr.Facts) { f.Tokens, f.Aborted = 170001, true }), tr.Accept, states.Idle},
		{"over, stale", states.Classifying, ended(func(f *tr.Facts) { f.Tokens, f.Stale = 170001, true }), tr.Accept, states.Idle},
		{"fatal error", states.Classifying, ended(func(f *tr.Facts) { f.Class, f.Error, f.Tokens = classify.Fatal, true, 170001 }), tr.Accept, states.Idle},
		{"success", states.Classifying, ended(func(*tr.Facts) {}), tr.Accept, states.Idle},
		{"Abort while the store is asked", states.Classifying, with(func(f *tr.Facts) { f.Signal = tr.AbortCalled }), tr.Cancel, states.Cancelled},
		{"a shared limit holds the user's run", states.Idle, with(func(f *tr.Facts) { f.Signal, f.SharedHoldMs = tr.RunEnded, 1 }), tr.WaitShared, states.Backoff},
		{"a shared limit holds a continuation", states.Continuing, with(func(f *tr.Facts) { f.Signal, f.Started, f.SharedHoldMs = tr.RunEnded, true, 2000 }), tr.WaitShared, states.Backoff},
		{"the wait ends", states.Backoff, with(func(f *tr.Facts) { f.Signal, f.CurrentTimer = tr.TimerFired, true }), tr.Elapsed, states.Continuing},
		{"an earlier backoff's timer", states.Backoff, with(func(f *tr.Facts) { f.Signal = tr.TimerFired }), "", ""},
		{"AbortRetry in backoff", states.Backoff, with(func(f *tr.Facts) { f.Signal = tr.AbortRetryCalled }), tr.CancelRetry, states.Cancelled},
		{"Abort in backoff", states.Backoff, with(func(f *tr.Facts) { f.Signal = tr.AbortCalled }), tr.Cancel, states.Cancelled},
		{"Compact in backoff", states.Backoff, with(func(f *tr.Facts) { f.Signal = tr.CompactCalled }), tr.CompactInBackoff, states.Compacting},
		{"Compact in backoff, already compacted", states.Backoff, with(func(f *tr.Facts) { f.Signal, f.AlreadyCompacted = tr.CompactCalled, true }), tr.CompactRefused, states.Backoff},
		{"AbortCompaction in backoff", states.Backoff, with(func(f *tr.Facts) { f.Signal = tr.AbortCompactionCalled }), "", ""},
		{"Abort in continuing", states.Continuing, with(func(f *tr.Facts) { f.Signal = tr.AbortCalled }), tr.Cancel, states.Cancelled},
		{"AbortRetry in continuing", states.Continuing, with(func(f *tr.Facts) { f.Signal = tr.AbortRetryCalled }), "", ""},
		{"Abort in compacting", states.Compacting, with(func(f *tr.Facts) { f.Signal = tr.AbortCalled }), tr.Cancel, states.Cancelled},
		{"AbortCompaction in compacting", states.Compacting, with(func(f *tr.Facts) { f.Signal = tr.AbortCompactionCalled }), tr.CancelCompaction, states.Cancelled},
		{"AbortCompaction while its entry is written", states.Compacting, with(func(f *tr.Facts) { f.Signal, f.Committing = tr.AbortCompactionCalled, true }), "", ""},
		{"AbortRetry in compacting", states.Compacting, with(func(f *tr.Facts) { f.Signal = tr.AbortRetryCalled }), "", ""},
		{"overflow compaction done", states.Compacting, with(func(f *tr.Facts) { f.Signal, f.Compacted, f.WillRetry = tr.CompactionEnded, true, true }), tr.Resume, states.Continuing},
		{"threshold compaction done", states.Compacting, with(func(f *tr.Facts) { f.Signal, f.Compacted = tr.CompactionEnded, true }), tr.CompactionEnd, states.Idle},
		{"overflow compaction failed", states.Compacting, with(func(f *tr.Facts) { f.Signal, f.WillRetry = tr.CompactionEnded, true }), tr.RecoveryFailed, states.Idle},
		{"exhausted passes on", states.Exhausted, tr.Facts{}, tr.Reset, states.Idle},
		{"cancelled passes on", states.Cancelled, tr.Facts{}, tr.Reset, states.Idle},
		{"AbortRetry in idle", states.Idle, with(func(f *tr.Facts) { f.Signal = tr.AbortRetryCalled }), "", ""},
		{"Abort in idle", states.Idle, with(func(f *tr.Facts) { f.Signal = tr.AbortCalled }), tr.Abort, states.Idle},
		{"Compact in idle", states.Idle, with(func(f *tr.Facts) { f.Signal = tr.CompactCalled }), tr.Compact, states.Compacting},
		{"Compact in idle, already compacted", states.Idle, with(func(f *tr.Facts) { f.Signal, f.AlreadyCompacted = tr.CompactCalled, true }), tr.CompactRefused, states.Idle},
		{"a stale timer in idle", states.Idle, with(func(f *tr.Facts) { f.Signal, f.CurrentTimer = tr.TimerFired, true }), "", ""},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, ok := tr.Table().Next(c.from, &c.facts)
			if c.want == "" {
				assert.False(t, ok, "nothing should apply, got %s", r.Trigger)
				return
			}
			require.True(t, ok, "no rule applies")
			assert.Equal(t, c.want, r.Trigger)
			assert.Equal(t, c.to, r.Target(c.from))
			seen[fmt.Sprintf("%s/%s", c.from, r.Trigger)] = true
		})
	}
	for _, r := range tr.Table() {
		for _, from := range r.From {
			assert.True(t, seen[fmt.Sprintf("%s/%s", from, r.Trigger)], "no case takes %s from %s", r.Trigger, from)
		}
	}
}

func TestTableMatchesSpec(t *testing.T) {
	type row struct {
		from  []states.State
		to    states.State
		guard string
	}
	idle, classifying, backoff, continuing := states.Idle, states.Classifying, states.Backoff, states.Continuing
	compacting, exhausted, cancelled := states.Compacting, states.Exhausted, states.Cancelled
	want := map[tr.Trigger]row{
		tr.AgentEnd:         {[]states.State{idle, continuing}, classifying, "runEnded"},
		tr.StartFailed:      {[]states.State{idle, continuing}, idle, "startFailed"},
		tr.Reply:            {[]states.State{idle, continuing}, tr.Stay, "replySucceeded"},
		tr.WaitShared:       {[]states.State{idle, continuing}, backoff, "sharedLimitHolds"},
		tr.AskCredentials:   {[]states.State{classifying}, tr.Stay, "awaitingCredential"},
		tr.RetryNow:         {[]states.State{classifying}, backoff, "retryAfterSwitch"},
		tr.Fallback:         {[]states.State{classifying}, continuing, "fallbackSwitch"},
		tr.FallbackCompact:  {[]states.State{classifying}, compacting, "fallbackCompact"},
		tr.Revert:           {[]states.State{idle}, tr.Stay, "cooldownOver"},
		tr.Retry:            {[]states.State{classifying}, backoff, "retryAllowed"},
		tr.Exhaust:          {[]states.State{classifying}, exhausted, "retriesExhausted"},
		tr.ExhaustElapsed:   {[]states.State{classifying}, exhausted, "budgetExhausted"},
		tr.WaitReset:        {[]states.State{classifying}, backoff, "resetWithin"},
		tr.ResetTooFar:      {[]states.State{classifying}, exhausted, "resetTooFar"},
		tr.Overflow:         {[]states.State{classifying}, compacting, "overflowRecoverable"},
		tr.TooLarge:         {[]states.State{classifying}, idle, "overflowTooLarge"},
		tr.Threshold:        {[]states.State{classifying}, compacting, "overThreshold"},
		tr.Refuse:           {[]states.State{classifying}, idle, "overflowRepeated"},
		tr.Unrecovered:      {[]states.State{classifying}, idle, "overflowNotCompacted"},
		tr.Accept:           {[]states.State{classifying}, idle, "nothingToDo"},
		tr.CheckOverflow:    {[]states.State{idle}, compacting, "overflowRecoverable"},
		tr.CheckThreshold:   {[]states.State{idle}, compacting, "overThreshold"},
		tr.CheckRoom:        {[]states.State{idle}, compacting, "promptOverWindow"},
		tr.CheckTooLarge:    {[]states.State{idle}, tr.Stay, "promptTooLarge"},
		tr.Elapsed:          {[]states.State{backoff}, continuing, "currentTimerFired"},
		tr.Compact:          {[]states.State{idle}, compacting, "compactRequested"},
		tr.CompactInBackoff: {[]states.State{backoff}, compacting, "compactRequested"},
		tr.CompactRefused:   {[]states.State{idle, backoff}, tr.Stay, "alreadyCompacted"},
		tr.Resume:           {[]states.State{compacting}, continuing, "compactedWillRetry"},
		tr.CompactionEnd:    {[]states.State{compacting}, idle, "compactionEnded"},
		tr.RecoveryFailed:   {[]states.State{compacting}, idle, "recoveryFailed"},
		tr.Abort:            {[]states.State{idle}, tr.Stay, "abortCalled"},
		tr.Cancel:           {[]states.State{classifying, backoff, continuing, compacting}, cancelled, "abortCalled"},
		tr.CancelRetry:      {[]states.State{backoff}, cancelled, "abortRetryCalled"},
		tr.CancelCompaction: {[]states.State{compacting}, cancelled, "abortCompactionCalled"},
		tr.Reset:            {[]states.State{exhausted, cancelled}, idle, "always"},
	}
	table := tr.Table()
	require.Len(t, table, len(want))
	for _, r := range table {
		w, ok := want[r.Trigger]
		require.True(t, ok, "unexpected trigger %s", r.Trigger)
		assert.Equal(t, w.from, r.From, r.Trigger)
		assert.Equal(t, w.to, r.To, r.Trigger)
		assert.Equal(t, w.guard, r.Guard.Name, r.Trigger)
		assert.NotEmpty(t, r.Guard.Doc, r.Trigger)
		for _, a := range r.Actions {
			assert.NotEmpty(t, a.Doc(), "%s: action %s has no doc", r.Trigger, a)
		}
	}

	// Table returns a copy.
	table[0].From[0] = states.Backoff
	assert.Equal(t, states.Idle, tr.Table()[0].From[0])
	table[1].Actions[0] = "changed"
	assert.Equal(t, tr.EndChainFailed, tr.Table()[1].Actions[0])
}

// TestEveryActionIsUsedAndDocumented: the table uses every action it
// declares, and each has a doc.
func TestEveryActionIsUsedAndDocumented(t *testing.T) {
	used := map[tr.Action]bool{}
	for _, r := range tr.Table() {
		for _, a := range r.Actions {
			used[a] = true
		}
	}
	for _, a := range tr.Actions() {
		assert.True(t, used[a], "action %s is used by no rule", a)
		assert.NotEmpty(t, a.Doc(), "action %s has no doc", a)
	}
	assert.Len(t, used, len(tr.Actions()))
	assert.Empty(t, tr.Action("nope").Doc())
}

func TestCompactionThreshold(t *testing.T) {
	cases := []struct{ window, reserve, want int }{
		{200000, 16384, 170000},
		{50000, 16384, 33616},
		{128000, 16384, 108800},
		{1000003, 0, 850003}, // floor(0.15 × 1000003) = 150000
		{99, 0, 85},          // floor(14.85) = 14
	}
	for _, c := range cases {
		got, ok := tr.CompactionThreshold(c.window, c.reserve)
		assert.True(t, ok)
		assert.Equal(t, c.want, got, "window %d reserve %d", c.window, c.reserve)
	}
	_, ok := tr.CompactionThreshold(0, 16384)
	assert.False(t, ok)
	_, ok = tr.CompactionThreshold(-5, 0)
	assert.False(t, ok)
	assert.False(t, tr.Facts{Tokens: 1 << 50, ReserveTokens: 1}.OverThreshold(), "window 0 never compacts")
}

func TestSignalNames(t *testing.T) {
	names := map[string]bool{}
	for _, s := range tr.Signals() {
		assert.NotContains(t, s.String(), "Signal(")
		names[s.String()] = true
	}
	assert.Len(t, names, len(tr.Signals()))
	assert.Equal(t, "Signal(200)", tr.Signal(200).String())
}

// Next handed no facts (nil) takes no rule, in any state, rather than have
// a guard read through nil: not even the pass-through states' rule, whose
// guard holds whatever the facts.
func TestNextWithNilFacts(t *testing.T) {
	for _, s := range states.All() {
		var ok bool
		require.NotPanics(t, func() { _, ok = tr.Table().Next(s, nil) }, s)
		assert.False(t, ok, s)
	}
}
