package props_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

// step is one move of a path: the event taken from a state.
type step struct {
	from  states.State
	event transitions.Trigger
	to    states.State
}

// unplayed are the moves a session cannot be driven through from outside,
// each covered where it can be: Abort while the decision waits for the
// credential store (the session asks the store and hears its answer in one
// step of its loop, so nothing can land in between; the engine's tests
// take it).
var unplayed = map[edge]bool{{states.Classifying, transitions.Cancel}: true}

// shortestPaths walks the table breadth-first from idle and returns, for
// each move (a rule from a state to another; an internal rule emits no
// state_change to follow), a shortest sequence of moves that reaches the
// move's state and takes it.
func shortestPaths() map[edge][]step {
	toState := map[states.State][]step{states.Idle: {}}
	queue := []states.State{states.Idle}
	paths := map[edge][]step{}
	rules := transitions.Table()
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, r := range rules {
			e := edge{s, r.Trigger}
			if !slices.Contains(r.From, s) || r.Internal(s) || unplayed[e] {
				continue
			}
			p := append(slices.Clone(toState[s]), step{s, r.Trigger, r.To})
			if _, seen := paths[e]; !seen {
				paths[e] = p
			}
			// The check before a prompt and a manual compaction have no
			// continuation to follow: a path goes no further through them.
			// Nor does a model fallback: the paths of the other moves run
			// without the setting.
			if (s == states.Idle && r.Trigger != transitions.AgentEnd) || r.Trigger == transitions.Fallback || r.Trigger == transitions.FallbackCompact {
				continue
			}
			if _, seen := toState[r.To]; !seen {
				toState[r.To] = p
				queue = append(queue, r.To)
			}
		}
	}
	// A refusal needs an overflow episode already compacted once: the
	// shortest path the facts allow goes through a recovery first.
	paths[edge{states.Classifying, transitions.Refuse}] = []step{
		{states.Idle, transitions.AgentEnd, states.Classifying},
		{states.Classifying, transitions.Overflow, states.Compacting},
		{states.Compacting, transitions.Resume, states.Continuing},
		{states.Continuing, transitions.AgentEnd, states.Classifying},
		{states.Classifying, transitions.Refuse, states.Idle},
	}
	// An overflow recovery always continues or fails: a compaction that
	// ends otherwise is a threshold's.
	paths[edge{states.Compacting, transitions.CompactionEnd}] = []step{
		{states.Idle, transitions.AgentEnd, states.Classifying},
		{states.Classifying, transitions.Threshold, states.Compacting},
		{states.Compacting, transitions.CompactionEnd, states.Idle},
	}
	return paths
}

func TestEveryEdgeHasAShortestPath(t *testing.T) {
	paths := shortestPaths()
	for _, r := range transitions.Table() {
		for _, from := range r.From {
			if r.Internal(from) || unplayed[edge{from, r.Trigger}] {
				continue
			}
			p, ok := paths[edge{from, r.Trigger}]
			require.True(t, ok, "no path takes %s from %s", r.Trigger, from)
			require.Equal(t, states.Idle, p[0].from)
			last := p[len(p)-1]
			assert.Equal(t, step{from, r.Trigger, r.To}, last)
			for i := 1; i < len(p); i++ {
				assert.Equal(t, p[i-1].to, p[i].from, "a path is connected")
			}
		}
	}
	// The longest shortest path: idle agent_end, retry, elapsed, then the
	// continuation's own move.
	assert.Len(t, paths[edge{states.Continuing, transitions.StartFailed}], 4)
}

// scenario is how a path is played on a real session: the scripted calls,
// the settings, and what to do when the session reaches a state.
type scenario struct {
	calls      []scripted.Call
	maxRetries int
	// maxElapsedMs is the time budget, for a path that ends a chain on it.
	maxElapsedMs int64
	slowSum      bool
	failSum      bool // an overflow compaction that ends without a continuation
	// compactionOff: the path's run settles with compaction disabled.
	compactionOff bool
	// credentials: the session has a store of two keys.
	credentials bool
	// compact: the path starts with Compact, not with a prompt.
	compact bool
	// waitForReset: the path waits for a usage limit's reset.
	waitForReset bool
	// fallback: the session falls back at an overload, to a model of the
	// primary's window, or (fallbackWindow) of a window the context does
	// not fit.
	fallback       bool
	fallbackWindow int
	// holdRun: the path's run number holdRun (from 1) is held by a limit
	// shared by sessions, for a second; 0: no limiter.
	holdRun int
	// before is the call of a turn played with compaction disabled before
	// the path's prompt, whose check then compacts it.
	before  *scripted.Call
	actions []action
}

type action struct {
	at states.State
	do func(*session.Session)
}

// callFor is the answer of a run whose decision must take next.
func callFor(next transitions.Trigger) scripted.Call {
	switch next {
	case transitions.Retry, transitions.Exhaust, transitions.ExhaustElapsed:
		return scripted.Call{StopReason: "error", ErrorMessage: "503 Service Unavailable"}
	case transitions.RetryNow:
		return scripted.Call{StopReason: "error", ErrorMessage: "429 usage limit reached for this key"}
	case transitions.WaitReset:
		return scripted.Call{StopReason: "error", ErrorMessage: "429 usage limit reached, retry-after: 600"}
	case transitions.ResetTooFar:
		return scripted.Call{StopReason: "error", ErrorMessage: "429 usage limit reached, retry-after: 86400"}
	case transitions.Overflow, transitions.Refuse, transitions.Unrecovered, transitions.CheckOverflow:
		return scripted.Call{StopReason: "error", ErrorMessage: "prompt is too long: 213462 tokens > 200000 maximum"}
	case transitions.TooLarge:
		return scripted.Call{StopReason: "error", ErrorMessage: overflowTexts[2]}
	case transitions.Fallback, transitions.FallbackCompact:
		return scripted.Call{StopReason: "error", ErrorMessage: "529 overloaded_error: Overloaded"}
	case transitions.Threshold, transitions.CheckThreshold:
		return scripted.Call{StopReason: "stop", Usage: &transcript.Usage{Input: 180000, TotalTokens: 180000}}
	case transitions.CheckRoom:
		// An answer of 190,000 estimated tokens and no usage: the next
		// prompt with it is over the window less the reserve.
		return scripted.Call{StopReason: "stop", Text: strings.Repeat("x", 760000), Usage: &transcript.Usage{}}
	}
	return scripted.Call{StopReason: "stop", Text: "done"}
}

// compactNow is Compact as an action: it runs on its own goroutine, as the
// session's caller would, and its outcome is the path's, not the action's.
func compactNow(s *session.Session) {
	go func() { _, _ = s.Compact(context.Background(), "") }()
}

// play turns a path into a scenario.
func play(path []step) scenario {
	sc := scenario{maxRetries: 3}
	retries, runs := 0, 0
	// elapsed is the time the chain has run, its runs taking none: the
	// sum of its delays under DefaultConfig (no jitter, capped at 60 s).
	var elapsed int64
	delay := func(attempt int) int64 { return min(int64(2000)<<min(attempt-1, 10), 60000) }
	for i, st := range path {
		var next transitions.Trigger
		if i+1 < len(path) {
			next = path[i+1].event
		}
		switch st.event {
		case transitions.AgentEnd:
			if next == transitions.TooLarge {
				// A tool call too large for any window, then the overflow.
				sc.calls = append(sc.calls, scripted.Call{StopReason: "toolUse", Text: hugeText})
			}
			sc.calls = append(sc.calls, callFor(next))
		case transitions.Unrecovered:
			sc.compactionOff = true
		case transitions.CheckOverflow, transitions.CheckThreshold, transitions.CheckRoom:
			c := callFor(st.event)
			sc.before = &c
			sc.calls = append(sc.calls, callFor(transitions.Accept))
		case transitions.RetryNow:
			sc.credentials = true
		case transitions.WaitReset, transitions.ResetTooFar:
			sc.waitForReset = true
		case transitions.Fallback:
			sc.fallback = true
		case transitions.FallbackCompact:
			// Below the default reserve: every context is over its
			// threshold.
			sc.fallback, sc.fallbackWindow = true, 1000
		case transitions.WaitShared:
			sc.holdRun = runs + 1
		}
		if st.event == transitions.AgentEnd || st.event == transitions.StartFailed {
			runs++ // a run ended
		}
		switch st.event {
		case transitions.Retry, transitions.RetryNow, transitions.WaitReset:
			retries++
			if st.event == transitions.Retry {
				elapsed += delay(retries)
			}
		case transitions.Exhaust:
			sc.maxRetries = retries
		case transitions.ExhaustElapsed:
			// No count limit, and a budget every retry so far fits in that
			// the next one's delay does not.
			sc.maxRetries, sc.maxElapsedMs = -1, elapsed+delay(retries+1)-1
		case transitions.Overflow:
			sc.failSum = next == transitions.RecoveryFailed
		case transitions.Compact:
			sc.compact = true
			sc.slowSum = next == transitions.Cancel || next == transitions.CancelCompaction
		case transitions.CompactInBackoff:
			sc.actions = append(sc.actions, action{st.from, compactNow})
			sc.slowSum = next == transitions.Cancel || next == transitions.CancelCompaction
		case transitions.Elapsed, transitions.Resume, transitions.Fallback:
			// The continuation's call: slow when the path leaves it by a
			// cancel or ends in it, refused for a stall.
			switch next {
			case transitions.StartFailed:
				sc.calls = append(sc.calls, scripted.Call{Refuse: "refused"})
			case transitions.Cancel, "":
				c := callFor(transitions.Accept)
				c.LatencyMs = 5000
				sc.calls = append(sc.calls, c)
			}
		case transitions.CancelRetry:
			sc.actions = append(sc.actions, action{states.Backoff, (*session.Session).AbortRetry})
		case transitions.CancelCompaction:
			sc.slowSum = true
			sc.actions = append(sc.actions, action{states.Compacting, (*session.Session).AbortCompaction})
		case transitions.Cancel:
			if st.from == states.Compacting {
				sc.slowSum = true
			}
			sc.actions = append(sc.actions, action{st.from, (*session.Session).Abort})
		}
	}
	return sc
}

// holdRun is a limit shared by sessions that, once armed, holds the
// n-th run asked for, for a second, and admits every other.
type holdRun struct {
	mu       sync.Mutex
	n, asked int
}

func (h *holdRun) arm(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n, h.asked = n, 0
}

func (h *holdRun) Admit(provider, _ string) (time.Time, string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked++
	if h.n > 0 && h.asked == h.n {
		return time.Now().Add(time.Second), provider, "rate_limited"
	}
	return time.Time{}, "", ""
}

func (*holdRun) Done(string, string, *transcript.Message) {}

// failingSummarizer always fails.
type failingSummarizer struct{}

func (failingSummarizer) Summarize(context.Context, policy.SummaryRequest) (policy.Summary, error) {
	return policy.Summary{}, errors.New("no model to summarize with")
}

// TestReplayEveryPath plays each edge's shortest path on a real session and
// checks that the session takes exactly those moves.
func TestReplayEveryPath(t *testing.T) {
	for e, path := range shortestPaths() {
		t.Run(fmt.Sprintf("%s from %s", e.event, e.from), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc := play(path)
				cfg := policy.DefaultConfig()
				cfg.Retry.MaxRetries, cfg.Retry.MaxElapsedMs = sc.maxRetries, sc.maxElapsedMs
				cfg.Compaction.KeepRecentTokens = 5
				cfg.Retry.WaitForReset = sc.waitForReset
				if sc.fallback {
					cfg.Fallback = &policy.FallbackConfig{Models: []policy.FallbackModel{{ID: "scripted-2", ContextWindow: sc.fallbackWindow}}, After: "overloaded"}
				}
				agent := scripted.New(scripted.Script{Model: scripted.DefaultModel})
				opts := []session.Option{session.WithConfig(cfg), session.WithModel(scripted.DefaultModel)}
				switch {
				case sc.slowSum:
					opts = append(opts, session.WithSummarizer(slowSummarizer{}))
				case sc.failSum:
					opts = append(opts, session.WithSummarizer(failingSummarizer{}))
				}
				lim := &holdRun{}
				if sc.holdRun > 0 {
					opts = append(opts, session.WithLimiter(lim))
				}
				if sc.credentials {
					store, err := credentials.NewMemoryCredentials(nil,
						policy.Credential{ID: "a", Type: "api_key", Provider: scripted.DefaultModel.Provider},
						policy.Credential{ID: "b", Type: "api_key", Provider: scripted.DefaultModel.Provider},
					)
					if err != nil {
						t.Fatal(err)
					}
					opts = append(opts, session.WithCredentials(store))
				}
				s, err := session.New(agent, opts...)
				require.NoError(t, err)
				defer s.Close()
				require.NoError(t, s.Prompt(context.Background(), "a first question, long enough to be worth compacting"))
				if sc.before != nil || sc.compactionOff {
					s.SetAutoCompactionEnabled(false)
				}
				if sc.before != nil {
					agent.Append(*sc.before)
					_ = s.Prompt(context.Background(), "a turn settled with compaction off")
					s.SetAutoCompactionEnabled(true)
				}

				var mu sync.Mutex
				var moves []step
				s.Subscribe(func(ev events.Event) {
					if sc, ok := ev.(events.StateChange); ok {
						mu.Lock()
						moves = append(moves, step{sc.From, sc.Trigger, sc.To})
						mu.Unlock()
					}
				})
				agent.Append(sc.calls...)
				lim.arm(sc.holdRun)
				done := make(chan error, 1)
				if sc.compact {
					go func() { _, err := s.Compact(context.Background(), ""); done <- err }()
				} else {
					go func() { done <- s.Prompt(context.Background(), "the path's question") }()
				}
				for _, a := range sc.actions {
					reached := false
					for range 600 {
						synctest.Wait()
						if s.Status().State == a.at {
							reached = true
							break
						}
						time.Sleep(50 * time.Millisecond)
					}
					require.True(t, reached, "the session never reached %s", a.at)
					a.do(s)
				}
				<-done
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				require.GreaterOrEqual(t, len(moves), len(path), "moves %v", moves)
				assert.Equal(t, path, moves[:len(path)], "the session's moves begin with the path")
			})
		})
	}
}
