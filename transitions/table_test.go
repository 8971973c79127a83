package transitions_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/states"
	tr "github.com/agentfsm/agentfsm/transitions"
)

// specNext is §5 of the policy written out by hand, independently of the
// guards in the table: the event the specification names for a state and the
// facts, or false when the occurrence changes nothing.
func specNext(s states.State, f tr.Facts) (tr.Event, bool) {
	switch s {
	case states.Idle:
		if f.Signal == tr.RunEnded {
			return tr.AgentEnd, true
		}
		// §4.6: the check before a prompt is the compaction check only, and
		// takes a transition only when it compacts.
		if f.Signal == tr.PromptCheck && !f.Stale && f.CompactionEnabled {
			if f.Class == classify.Overflow && f.SameModel {
				if !f.EpisodeCompacted {
					return tr.Overflow, true
				}
				return "", false
			}
			w := f.ContextWindow
			errorLike := f.Error || f.Class == classify.Retryable || f.Class == classify.UsageLimit || f.Class == classify.Fatal
			if !errorLike && w > 0 && f.Tokens > w-max(w*15/100, f.ReserveTokens) {
				return tr.Threshold, true
			}
		}
	case states.Continuing:
		switch f.Signal {
		case tr.RunEnded:
			return tr.AgentEnd, true
		case tr.AbortCalled:
			return tr.Cancel, true
		case tr.NotStarted:
			return tr.StartFailed, true
		}
	case states.Classifying:
		// §1 step 1: a retryable error with a retry scheduled (or the chain
		// running out) stops here.
		// The check before a prompt (§4.6) is the compaction check only.
		retryable := f.Class == classify.Retryable || f.Class == classify.UsageLimit
		if retryable && f.RetryEnabled && f.Signal != tr.PromptCheck {
			if f.Attempt < f.MaxRetries && !(f.HintOverCap && !f.CredentialSwitched) {
				return tr.Retry, true
			}
			return tr.Exhaust, true
		}
		// §4.2 step 3: the overflow path owns a same-model overflow.
		if f.Class == classify.Overflow && f.SameModel {
			switch {
			case f.Stale:
				return tr.Settle, true
			case !f.CompactionEnabled:
				return tr.Unrecovered, true
			case f.EpisodeCompacted:
				return tr.Refuse, true
			}
			return tr.Overflow, true
		}
		// §4.2 steps 1, 2, 4: aborted (not before a prompt), stale,
		// compaction off, an error: stop.
		if f.Error || retryable || f.Class == classify.Fatal {
			return tr.Settle, true
		}
		if (f.Aborted && f.Signal != tr.PromptCheck) || f.Stale || !f.CompactionEnabled {
			return tr.Settle, true
		}
		// §4.2 step 5.
		w := f.ContextWindow
		if w > 0 && f.Tokens > w-max(w*15/100, f.ReserveTokens) {
			return tr.Threshold, true
		}
		return tr.Settle, true
	case states.Backoff:
		switch f.Signal {
		case tr.TimerFired:
			if f.CurrentTimer {
				return tr.Elapsed, true
			}
		case tr.AbortRetryCalled, tr.AbortCalled:
			return tr.Cancel, true
		}
	case states.Compacting:
		switch f.Signal {
		case tr.CompactionEnded:
			if f.Compacted && f.WillRetry {
				return tr.Resume, true
			}
			return tr.CompactionEnd, true
		case tr.AbortCalled, tr.AbortCompactionCalled:
			return tr.Cancel, true
		}
	case states.Exhausted, states.Cancelled:
		return tr.Reset, true
	}
	return "", false
}

// numbers are representative values around each numeric threshold.
var numbers = []struct{ attempt, maxRetries, tokens, window, reserve int }{
	{0, 3, 170000, 200000, 16384},
	{2, 3, 170001, 200000, 16384},
	{3, 3, 170001, 200000, 16384},
	{4, 3, 170000, 200000, 16384},
	{0, 0, 33617, 50000, 16384}, // reserve above 15%: threshold 33,616
	{0, 0, 33616, 50000, 16384},
	{1, 6, 1 << 40, 0, 16384}, // unknown window: never over
}

// TestExhaustive checks every state against every signal, class and
// combination of the boolean facts, with numbers around each threshold: at
// most one rule applies, it is the one §5 names, and in classifying exactly
// one applies.
func TestExhaustive(t *testing.T) {
	const nBools = 12
	rules := tr.Table()
	checked := 0
	for _, s := range states.All() {
		for _, sig := range tr.Signals() {
			for _, c := range classify.Classes() {
				for bits := range 1 << nBools {
					for _, n := range numbers {
						f := tr.Facts{
							Signal: sig, Class: c,
							Error: bits&1 != 0, Aborted: bits&2 != 0, RetryEnabled: bits&4 != 0,
							HintOverCap: bits&8 != 0, CompactionEnabled: bits&16 != 0, SameModel: bits&32 != 0,
							Stale: bits&64 != 0, EpisodeCompacted: bits&128 != 0, Compacted: bits&256 != 0,
							WillRetry: bits&512 != 0, CurrentTimer: bits&1024 != 0, CredentialSwitched: bits&2048 != 0,
							Attempt: n.attempt, MaxRetries: n.maxRetries,
							Tokens: n.tokens, ContextWindow: n.window, ReserveTokens: n.reserve,
						}
						var holding []tr.Event
						for _, r := range rules {
							if r.Applies(s, f) {
								holding = append(holding, r.Event)
							}
						}
						want, ok := specNext(s, f)
						got, gotOK := rules.Next(s, f)
						if len(holding) > 1 || ok != gotOK || (ok && (got.Event != want || holding[0] != want)) {
							t.Fatalf("state %s, facts %+v: rules holding %v, Next %v/%v, spec names %q/%v",
								s, f, holding, got.Event, gotOK, want, ok)
						}
						checked++
					}
				}
			}
		}
	}
	t.Logf("checked %d (state, facts) combinations", checked)
}

// TestNextEveryStateAndEvent walks every (state, event) pair of the table
// with facts that select it, and the occurrences that change nothing.
func TestNextEveryStateAndEvent(t *testing.T) {
	base := tr.Facts{RetryEnabled: true, CompactionEnabled: true, MaxRetries: 3, ContextWindow: 200000, ReserveTokens: 16384, SameModel: true}
	with := func(mod func(*tr.Facts)) tr.Facts { f := base; mod(&f); return f }
	cases := []struct {
		name  string
		from  states.State
		facts tr.Facts
		want  tr.Event // "" when nothing applies
		to    states.State
	}{
		{"a user's run ends", states.Idle, with(func(f *tr.Facts) { f.Signal = tr.RunEnded }), tr.AgentEnd, states.Classifying},
		{"check before a prompt, nothing to do", states.Idle, with(func(f *tr.Facts) { f.Signal = tr.PromptCheck }), "", ""},
		{"check before a prompt, overflow", states.Idle, with(func(f *tr.Facts) { f.Signal, f.Class, f.Error = tr.PromptCheck, classify.Overflow, true }), tr.Overflow, states.Compacting},
		{"check before a prompt, over the threshold", states.Idle, with(func(f *tr.Facts) { f.Signal, f.Tokens = tr.PromptCheck, 170001 }), tr.Threshold, states.Compacting},
		{"check before a prompt, aborted over the threshold", states.Idle, with(func(f *tr.Facts) { f.Signal, f.Tokens, f.Aborted = tr.PromptCheck, 170001, true }), tr.Threshold, states.Compacting},
		{"check before a prompt, retryable", states.Idle, with(func(f *tr.Facts) { f.Signal, f.Class, f.Error = tr.PromptCheck, classify.Retryable, true }), "", ""},
		{"a continuation ends", states.Continuing, with(func(f *tr.Facts) { f.Signal = tr.RunEnded }), tr.AgentEnd, states.Classifying},
		{"retryable, attempts left", states.Classifying, with(func(f *tr.Facts) { f.Class, f.Error, f.Attempt = classify.Retryable, true, 2 }), tr.Retry, states.Backoff},
		{"usage limit retries", states.Classifying, with(func(f *tr.Facts) { f.Class, f.Error = classify.UsageLimit, true }), tr.Retry, states.Backoff},
		{"retryable, no attempts left", states.Classifying, with(func(f *tr.Facts) { f.Class, f.Error, f.Attempt = classify.Retryable, true, 3 }), tr.Exhaust, states.Exhausted},
		{"retryable, hint over the cap", states.Classifying, with(func(f *tr.Facts) { f.Class, f.Error, f.HintOverCap = classify.Retryable, true, true }), tr.Exhaust, states.Exhausted},
		{"retryable, before a prompt", states.Classifying, with(func(f *tr.Facts) { f.Class, f.Error, f.Signal = classify.Retryable, true, tr.PromptCheck }), tr.Settle, states.Idle},
		{"retryable, retry off", states.Classifying, with(func(f *tr.Facts) { f.Class, f.Error, f.RetryEnabled = classify.Retryable, true, false }), tr.Settle, states.Idle},
		{"overflow", states.Classifying, with(func(f *tr.Facts) { f.Class, f.Error = classify.Overflow, true }), tr.Overflow, states.Compacting},
		{"silent overflow", states.Classifying, with(func(f *tr.Facts) { f.Class, f.Tokens = classify.Overflow, 250000 }), tr.Overflow, states.Compacting},
		{"overflow, episode compacted", states.Classifying, with(func(f *tr.Facts) { f.Class, f.Error, f.EpisodeCompacted = classify.Overflow, true, true }), tr.Refuse, states.Idle},
		{"overflow, compaction off", states.Classifying, with(func(f *tr.Facts) { f.Class, f.Error, f.CompactionEnabled = classify.Overflow, true, false }), tr.Unrecovered, states.Idle},
		{"overflow, stale", states.Classifying, with(func(f *tr.Facts) { f.Class, f.Error, f.Stale = classify.Overflow, true, true }), tr.Settle, states.Idle},
		{"overflow from another model", states.Classifying, with(func(f *tr.Facts) { f.Class, f.Error, f.SameModel = classify.Overflow, true, false }), tr.Settle, states.Idle},
		{"silent overflow from another model", states.Classifying, with(func(f *tr.Facts) { f.Class, f.SameModel, f.Tokens = classify.Overflow, false, 250000 }), tr.Threshold, states.Compacting},
		{"over the threshold", states.Classifying, with(func(f *tr.Facts) { f.Tokens = 170001 }), tr.Threshold, states.Compacting},
		{"at the threshold", states.Classifying, with(func(f *tr.Facts) { f.Tokens = 170000 }), tr.Settle, states.Idle},
		{"over, window unknown", states.Classifying, with(func(f *tr.Facts) { f.Tokens, f.ContextWindow = 170001, 0 }), tr.Settle, states.Idle},
		{"over, aborted", states.Classifying, with(func(f *tr.Facts) { f.Tokens, f.Aborted = 170001, true }), tr.Settle, states.Idle},
		{"over, aborted, before a prompt", states.Classifying, with(func(f *tr.Facts) { f.Tokens, f.Aborted, f.Signal = 170001, true, tr.PromptCheck }), tr.Threshold, states.Compacting},
		{"over, stale", states.Classifying, with(func(f *tr.Facts) { f.Tokens, f.Stale = 170001, true }), tr.Settle, states.Idle},
		{"fatal error", states.Classifying, with(func(f *tr.Facts) { f.Class, f.Error, f.Tokens = classify.Fatal, true, 170001 }), tr.Settle, states.Idle},
		{"success", states.Classifying, base, tr.Settle, states.Idle},
		{"the wait ends", states.Backoff, with(func(f *tr.Facts) { f.Signal, f.CurrentTimer = tr.TimerFired, true }), tr.Elapsed, states.Continuing},
		{"an earlier backoff's timer", states.Backoff, with(func(f *tr.Facts) { f.Signal = tr.TimerFired }), "", ""},
		{"AbortRetry in backoff", states.Backoff, with(func(f *tr.Facts) { f.Signal = tr.AbortRetryCalled }), tr.Cancel, states.Cancelled},
		{"Abort in backoff", states.Backoff, with(func(f *tr.Facts) { f.Signal = tr.AbortCalled }), tr.Cancel, states.Cancelled},
		{"AbortCompaction in backoff", states.Backoff, with(func(f *tr.Facts) { f.Signal = tr.AbortCompactionCalled }), "", ""},
		{"Abort in continuing", states.Continuing, with(func(f *tr.Facts) { f.Signal = tr.AbortCalled }), tr.Cancel, states.Cancelled},
		{"AbortRetry in continuing", states.Continuing, with(func(f *tr.Facts) { f.Signal = tr.AbortRetryCalled }), "", ""},
		{"continuation fails to start", states.Continuing, with(func(f *tr.Facts) { f.Signal = tr.NotStarted }), tr.StartFailed, states.Idle},
		{"Abort in compacting", states.Compacting, with(func(f *tr.Facts) { f.Signal = tr.AbortCalled }), tr.Cancel, states.Cancelled},
		{"AbortCompaction in compacting", states.Compacting, with(func(f *tr.Facts) { f.Signal = tr.AbortCompactionCalled }), tr.Cancel, states.Cancelled},
		{"AbortRetry in compacting", states.Compacting, with(func(f *tr.Facts) { f.Signal = tr.AbortRetryCalled }), "", ""},
		{"overflow compaction done", states.Compacting, with(func(f *tr.Facts) { f.Signal, f.Compacted, f.WillRetry = tr.CompactionEnded, true, true }), tr.Resume, states.Continuing},
		{"threshold compaction done", states.Compacting, with(func(f *tr.Facts) { f.Signal, f.Compacted = tr.CompactionEnded, true }), tr.CompactionEnd, states.Idle},
		{"overflow compaction failed", states.Compacting, with(func(f *tr.Facts) { f.Signal, f.WillRetry = tr.CompactionEnded, true }), tr.CompactionEnd, states.Idle},
		{"exhausted passes on", states.Exhausted, tr.Facts{}, tr.Reset, states.Idle},
		{"cancelled passes on", states.Cancelled, tr.Facts{}, tr.Reset, states.Idle},
		{"AbortRetry in idle", states.Idle, with(func(f *tr.Facts) { f.Signal = tr.AbortRetryCalled }), "", ""},
		{"Abort in idle", states.Idle, with(func(f *tr.Facts) { f.Signal = tr.AbortCalled }), "", ""},
		{"a stale timer in idle", states.Idle, with(func(f *tr.Facts) { f.Signal, f.CurrentTimer = tr.TimerFired, true }), "", ""},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, ok := tr.Table().Next(c.from, c.facts)
			if c.want == "" {
				assert.False(t, ok, "nothing should apply, got %s", r.Event)
				return
			}
			require.True(t, ok, "no rule applies")
			assert.Equal(t, c.want, r.Event)
			assert.Equal(t, c.to, r.To)
			seen[fmt.Sprintf("%s/%s", c.from, r.Event)] = true
		})
	}
	for _, r := range tr.Table() {
		for _, from := range r.From {
			assert.True(t, seen[fmt.Sprintf("%s/%s", from, r.Event)], "no case takes %s from %s", r.Event, from)
		}
	}
}

func TestTableMatchesSpec(t *testing.T) {
	type row struct {
		from  []states.State
		to    states.State
		guard string
	}
	want := map[tr.Event]row{
		tr.AgentEnd:      {[]states.State{states.Idle, states.Continuing}, states.Classifying, "runEnded"},
		tr.Retry:         {[]states.State{states.Classifying}, states.Backoff, "retryAllowed"},
		tr.Exhaust:       {[]states.State{states.Classifying}, states.Exhausted, "retriesExhausted"},
		tr.Overflow:      {[]states.State{states.Classifying, states.Idle}, states.Compacting, "overflowRecoverable"},
		tr.Threshold:     {[]states.State{states.Classifying, states.Idle}, states.Compacting, "overThreshold"},
		tr.Refuse:        {[]states.State{states.Classifying}, states.Idle, "overflowRepeated"},
		tr.Unrecovered:   {[]states.State{states.Classifying}, states.Idle, "overflowNotCompacted"},
		tr.Settle:        {[]states.State{states.Classifying}, states.Idle, "nothingToDo"},
		tr.Elapsed:       {[]states.State{states.Backoff}, states.Continuing, "currentTimerFired"},
		tr.Cancel:        {[]states.State{states.Backoff, states.Continuing, states.Compacting}, states.Cancelled, "abortRequested"},
		tr.Resume:        {[]states.State{states.Compacting}, states.Continuing, "compactedWillRetry"},
		tr.CompactionEnd: {[]states.State{states.Compacting}, states.Idle, "compactionEnded"},
		tr.StartFailed:   {[]states.State{states.Continuing}, states.Idle, "startFailed"},
		tr.Reset:         {[]states.State{states.Exhausted, states.Cancelled}, states.Idle, "always"},
	}
	table := tr.Table()
	require.Len(t, table, len(want))
	for _, r := range table {
		w, ok := want[r.Event]
		require.True(t, ok, "unexpected event %s", r.Event)
		assert.Equal(t, w.from, r.From, r.Event)
		assert.Equal(t, w.to, r.To, r.Event)
		assert.Equal(t, w.guard, r.Guard.Name, r.Event)
		assert.NotEmpty(t, r.Guard.Doc, r.Event)
	}

	// Table returns a copy.
	table[0].From[0] = states.Backoff
	assert.Equal(t, states.Idle, tr.Table()[0].From[0])
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
