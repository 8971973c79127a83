package transitions

import (
	"slices"

	"github.com/agentfsm/agentfsm/states"
)

// Event names one transition of the machine. Each event has one set of
// source states and one destination.
type Event string

// The fourteen events, in table order.
const (
	AgentEnd    Event = "agent_end"
	Retry       Event = "retry"
	Exhaust     Event = "exhaust"
	Overflow    Event = "overflow"
	Threshold   Event = "threshold"
	Refuse      Event = "refuse"
	Unrecovered Event = "unrecovered"
	Settle      Event = "settle"
	Elapsed     Event = "elapsed"
	Cancel      Event = "cancel"
	Resume      Event = "resume"
	// CompactionEnd: the compaction ended, with or without a result, and
	// no continuation follows.
	CompactionEnd Event = "compaction_end"
	// StartFailed: the continuation could not start.
	StartFailed Event = "start_failed"
	Reset       Event = "reset"
)

// String returns the event's name.
func (e Event) String() string { return string(e) }

// Guard is a named predicate over the source state and the Facts. Holds must
// be pure: the same arguments always give the same answer.
type Guard struct {
	// Name is the guard's identifier, drawn on the diagram's edges.
	Name string
	// Doc says in words when the guard holds.
	Doc string
	// Holds reports whether the guard admits the transition from the given
	// source state with the given facts.
	Holds func(from states.State, f Facts) bool
}

// Rule is one row of the transition table: Event moves the machine from any
// state of From to To when Guard holds.
type Rule struct {
	Event Event
	From  []states.State
	To    states.State
	Guard Guard
}

// Applies reports whether r applies in state from with facts f: from is one of
// r.From and the guard holds.
func (r Rule) Applies(from states.State, f Facts) bool {
	return slices.Contains(r.From, from) && r.Guard.Holds(from, f)
}

// The guards, one per rule. The guards from classifying are written so that
// exactly one of them holds for any facts: settle is the complement of the
// others, which exclude each other by class and settings. overflow and
// threshold also leave idle, for the check before a prompt only.
var (
	guardRunEnded = Guard{
		Name: "runEnded",
		Doc:  "a run ended (agent_end)",
		Holds: func(_ states.State, f Facts) bool {
			return f.Signal == RunEnded
		},
	}
	guardRetryAllowed = Guard{
		Name: "retryAllowed",
		Doc:  "retryable error ∧ retry enabled ∧ attempt < maxRetries (∧ no retry hint above the delay cap, unless the credential was switched ∧ not the check before a prompt)",
		Holds: func(_ states.State, f Facts) bool {
			return f.retryableError() && f.RetryEnabled && f.Attempt < f.MaxRetries && !f.hintEndsChain()
		},
	}
	guardRetriesExhausted = Guard{
		Name: "retriesExhausted",
		Doc:  "retryable error ∧ retry enabled ∧ (attempt ≥ maxRetries ∨ a retry hint above the delay cap and no credential switch) (∧ not the check before a prompt)",
		Holds: func(_ states.State, f Facts) bool {
			return f.retryableError() && f.RetryEnabled && (f.Attempt >= f.MaxRetries || f.hintEndsChain())
		},
	}
	guardOverflowRecoverable = Guard{
		Name: "overflowRecoverable",
		Doc:  "overflow ∧ same model ∧ not stale ∧ compaction enabled ∧ episode not yet compacted (from idle: only the check before a prompt)",
		Holds: func(from states.State, f Facts) bool {
			return decides(from, f) && f.sameModelOverflow() && !f.Stale && f.CompactionEnabled && !f.EpisodeCompacted
		},
	}
	guardOverThreshold = Guard{
		Name: "overThreshold",
		Doc:  "not an error ∧ not aborted (except before a prompt) ∧ not a same-model overflow ∧ not stale ∧ compaction enabled ∧ tokens over the threshold (from idle: only the check before a prompt)",
		Holds: func(from states.State, f Facts) bool {
			skipAborted := f.Aborted && f.Signal != PromptCheck
			return decides(from, f) && f.successLike() && !skipAborted && !f.sameModelOverflow() && !f.Stale &&
				f.CompactionEnabled && f.OverThreshold()
		},
	}
	guardOverflowRepeated = Guard{
		Name: "overflowRepeated",
		Doc:  "overflow ∧ same model ∧ not stale ∧ compaction enabled ∧ episode already compacted once",
		Holds: func(_ states.State, f Facts) bool {
			return f.sameModelOverflow() && !f.Stale && f.CompactionEnabled && f.EpisodeCompacted
		},
	}
	guardOverflowNotCompacted = Guard{
		Name: "overflowNotCompacted",
		Doc:  "overflow ∧ same model ∧ not stale ∧ compaction disabled",
		Holds: func(_ states.State, f Facts) bool {
			return f.sameModelOverflow() && !f.Stale && !f.CompactionEnabled
		},
	}
	guardNothingToDo = Guard{
		Name: "nothingToDo",
		Doc:  "none of retryAllowed, retriesExhausted, overflowRecoverable, overThreshold, overflowRepeated, overflowNotCompacted holds",
		Holds: func(from states.State, f Facts) bool {
			for _, g := range []*Guard{&guardRetryAllowed, &guardRetriesExhausted, &guardOverflowRecoverable,
				&guardOverThreshold, &guardOverflowRepeated, &guardOverflowNotCompacted} {
				if g.Holds(from, f) {
					return false
				}
			}
			return true
		},
	}
	guardCurrentTimerFired = Guard{
		Name: "currentTimerFired",
		Doc:  "the timer of the backoff in progress fired",
		Holds: func(_ states.State, f Facts) bool {
			return f.Signal == TimerFired && f.CurrentTimer
		},
	}
	guardAbortRequested = Guard{
		Name: "abortRequested",
		Doc:  "Abort(); AbortRetry() in backoff; AbortCompaction() in compacting",
		Holds: func(from states.State, f Facts) bool {
			switch f.Signal {
			case AbortCalled:
				return true
			case AbortRetryCalled:
				return from == states.Backoff
			case AbortCompactionCalled:
				return from == states.Compacting
			}
			return false
		},
	}
	guardCompactedWillRetry = Guard{
		Name: "compactedWillRetry",
		Doc:  "the compaction succeeded ∧ willRetry",
		Holds: func(_ states.State, f Facts) bool {
			return f.Signal == CompactionEnded && f.Compacted && f.WillRetry
		},
	}
	guardCompactionEnded = Guard{
		Name: "compactionEnded",
		Doc:  "the compaction ended with no continuation to start (no willRetry, failed, or nothing to compact)",
		Holds: func(_ states.State, f Facts) bool {
			return f.Signal == CompactionEnded && !(f.Compacted && f.WillRetry)
		},
	}
	guardStartFailed = Guard{
		Name: "startFailed",
		Doc:  "the continuation could not start",
		Holds: func(_ states.State, f Facts) bool {
			return f.Signal == NotStarted
		},
	}
	guardAlways = Guard{
		Name:  "always",
		Doc:   "always, at once",
		Holds: func(states.State, Facts) bool { return true },
	}
)

// decides reports whether the facts are a decision's: any in classifying,
// and in idle only the check before a prompt.
func decides(from states.State, f Facts) bool {
	return from != states.Idle || f.Signal == PromptCheck
}

var table = Rules{
	{AgentEnd, []states.State{states.Idle, states.Continuing}, states.Classifying, guardRunEnded},
	{Retry, []states.State{states.Classifying}, states.Backoff, guardRetryAllowed},
	{Exhaust, []states.State{states.Classifying}, states.Exhausted, guardRetriesExhausted},
	{Overflow, []states.State{states.Classifying, states.Idle}, states.Compacting, guardOverflowRecoverable},
	{Threshold, []states.State{states.Classifying, states.Idle}, states.Compacting, guardOverThreshold},
	{Refuse, []states.State{states.Classifying}, states.Idle, guardOverflowRepeated},
	{Unrecovered, []states.State{states.Classifying}, states.Idle, guardOverflowNotCompacted},
	{Settle, []states.State{states.Classifying}, states.Idle, guardNothingToDo},
	{Elapsed, []states.State{states.Backoff}, states.Continuing, guardCurrentTimerFired},
	{Cancel, []states.State{states.Backoff, states.Continuing, states.Compacting}, states.Cancelled, guardAbortRequested},
	{Resume, []states.State{states.Compacting}, states.Continuing, guardCompactedWillRetry},
	{CompactionEnd, []states.State{states.Compacting}, states.Idle, guardCompactionEnded},
	{StartFailed, []states.State{states.Continuing}, states.Idle, guardStartFailed},
	{Reset, []states.State{states.Exhausted, states.Cancelled}, states.Idle, guardAlways},
}

// Rules is a transition table: the rules in order.
type Rules []Rule

// Table returns the transition table, in the order of the policy's
// specification. The result is a deep copy: changing it changes nothing here.
func Table() Rules {
	out := make(Rules, len(table))
	for i, r := range table {
		r.From = slices.Clone(r.From)
		out[i] = r
	}
	return out
}

// Next returns the rule of rs that applies in state from with facts f, and
// ok = false when none does (the occurrence changes nothing in that state,
// such as AbortRetry with no wait pending or a timer from an earlier
// backoff). The rule shares its From with rs: do not change it.
//
// Table's guards are written so that at most one rule applies; the
// package's tests check that over every state and every combination of
// facts.
func (rs Rules) Next(from states.State, f Facts) (r Rule, ok bool) {
	for _, r := range rs {
		if r.Applies(from, f) {
			return r, true
		}
	}
	return Rule{}, false
}
