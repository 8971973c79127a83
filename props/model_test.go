package props_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

// edge is one (source state, event) pair of the table.
type edge struct {
	from  states.State
	event transitions.Trigger
}

// coverage counts the table's edges taken across every run of the
// model-based test.
type coverage struct {
	mu    sync.Mutex
	taken map[edge]int
}

func (c *coverage) add(e edge) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.taken[e]++
}

// outcome kinds a scripted model call can have.
// Retryable errors come often, so that chains grow long enough to meet
// the other actions, and some kinds pair an error with what its
// continuation meets: a refusal to start, a slow answer an abort can land
// in, a second overflow, an overflow whose recovery cannot summarize. The
// pairs that lead to the table's rarest rules (start_failed and cancel
// from continuing, refuse, recovery_failed) are listed more than once, so
// that every round of TestSessionModel takes each of them many times.
var outcomeKinds = []string{
	"success", "tools", "retryable", "retryable", "hinted", "usage", "overflow", "fatal", "silent", "big", "big", "refuse",
	"retryThenRefuse", "retryThenRefuse", "retryThenRefuse", "retryThenSlow", "retryThenSlow",
	"overflowTwice", "overflowTwice", "overflowTwice", "poison", "poisonThenOverflow", "poisonThenOverflow", "poisonThenOverflow",
	"tooLarge", "tooLarge", "usageHinted", "usageHinted",
}

// overflowTexts are the overflow errors the script uses; the second also
// reads as a retryable error, which an overflow must never be treated as;
// the third follows a tool call too large for any window (tooLarge): its
// count is so far over the window that the call alone is over it, however
// many such calls the context holds.
var overflowTexts = []string{"prompt is too long: 213462 tokens > 200000 maximum", "503 overloaded: prompt is too long",
	"prompt is too long: 90000000 tokens > 200000 maximum"}

// hugeText is a tool call's text no compaction can make fit a window of
// 200,000 tokens, by the count the overflow after it gives.
var hugeText = strings.Repeat("x", 1<<20)

// drawCalls draws the answers of one prompt's model calls (more than one
// when retries and tools follow).
func drawCalls(t *rapid.T) []scripted.Call {
	n := rapid.IntRange(1, 4).Draw(t, "calls")
	var calls []scripted.Call
	for i := range n {
		kind := rapid.SampledFrom(outcomeKinds).Draw(t, fmt.Sprintf("kind%d", i))
		latency := rapid.SampledFrom([]int64{0, 0, 50, 1500, 8000, 8000}).Draw(t, fmt.Sprintf("latency%d", i))
		c := scripted.Call{LatencyMs: latency}
		switch kind {
		case "success":
			c.StopReason, c.Text = "stop", "done"
		case "poison":
			c.StopReason, c.Text = "stop", unsummarizable
		case "poisonThenOverflow":
			// An answer no summary can hold, then, as the next prompt's
			// first call, an overflow: its recovery compacts the answer
			// and the summarizer fails (recovery_failed), a rule the two
			// kinds drawn apart reach too rarely.
			calls = append(calls, scripted.Call{StopReason: "stop", Text: unsummarizable, LatencyMs: latency})
			c.StopReason, c.ErrorMessage = "error", overflowTexts[0]
		case "tools":
			calls = append(calls, scripted.Call{StopReason: "toolUse", Text: "read a file", LatencyMs: latency})
			c.StopReason, c.Text = "stop", "done after tools"
		case "retryable":
			c.StopReason, c.ErrorMessage = "error", rapid.SampledFrom([]string{"503 Service Unavailable", "overloaded", "429 Too Many Requests"}).Draw(t, "text")
		case "hinted":
			c.StopReason, c.ErrorMessage = "error", fmt.Sprintf("429 rate limit; retry-after-ms: %d", rapid.IntRange(0, 20000).Draw(t, "hint"))
		case "usage":
			c.StopReason, c.ErrorMessage = "error", "429 usage limit reached"
		case "usageHinted":
			// A usage limit whose reset is known: with waitForReset, a
			// wait for it (or, beyond maxResetWaitMs, the turn fails).
			c.StopReason, c.ErrorMessage = "error", fmt.Sprintf("429 usage limit reached; retry-after-ms: %d", rapid.IntRange(0, 30000).Draw(t, "reset"))
		case "overflow":
			c.StopReason, c.ErrorMessage = "error", rapid.SampledFrom(overflowTexts[:2]).Draw(t, "overflow text")
		case "tooLarge":
			calls = append(calls, scripted.Call{StopReason: "toolUse", Text: hugeText, LatencyMs: latency})
			c.StopReason, c.ErrorMessage = "error", overflowTexts[2]
		case "overflowTwice":
			calls = append(calls, scripted.Call{StopReason: "error", ErrorMessage: overflowTexts[0]})
			c.StopReason, c.ErrorMessage = "error", overflowTexts[1]
		case "fatal":
			c.StopReason, c.ErrorMessage = "error", "401 invalid x-api-key"
		case "silent":
			c.StopReason, c.Usage = "stop", &transcript.Usage{Input: 250000}
		case "big":
			c.StopReason, c.Usage = "stop", &transcript.Usage{Input: 180000, TotalTokens: 180000}
		case "refuse":
			c = scripted.Call{Refuse: "the agent refused to start"}
		case "retryThenRefuse":
			calls = append(calls, scripted.Call{StopReason: "error", ErrorMessage: "503 Service Unavailable"})
			c = scripted.Call{Refuse: "the agent refused to start"}
		case "retryThenSlow":
			calls = append(calls, scripted.Call{StopReason: "error", ErrorMessage: "overloaded"})
			c.StopReason, c.Text, c.LatencyMs = "stop", "slow answer", 8000
		}
		calls = append(calls, c)
	}
	return calls
}

// unsummarizable is the text of an answer the model's summarizer refuses
// to summarize: a compaction whose cut ends with it fails.
const unsummarizable = "an answer no summary can hold"

// slowSummarizer takes 300 ms (fake time) so aborts can land in it, and
// fails on a cut whose newest message is an unsummarizable answer. Only
// the newest: a cut that goes past the answer succeeds and summarizes it
// away, so one such answer fails one compaction, not every later one
// (which would starve the rules a compaction's success leads to).
type slowSummarizer struct{}

func (slowSummarizer) Summarize(ctx context.Context, req policy.SummaryRequest) (policy.Summary, error) {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Text() == unsummarizable {
		return policy.Summary{}, errors.New("the summarizer refuses this conversation")
	}
	t := time.NewTimer(300 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return policy.DigestSummarizer{}.Summarize(ctx, req)
	case <-ctx.Done():
		return policy.Summary{}, context.Cause(ctx)
	}
}

// harness drives one session and keeps the reference model the events are
// checked against. The model is built from the transition table, the
// classifier and the settings the test chose, never from the session's own
// answers.
type harness struct {
	t     *rapid.T
	s     *session.Session
	agent *scripted.Agent
	cfg   policy.Config
	model policy.Model
	cov   *coverage

	mu  sync.Mutex
	evs []events.Event
	pos int

	// The reference model.
	state     states.State
	attempt   int
	chainOpen bool
	last      *transcript.Message // the last assistant message of the run in flight
	// hugeTail: a tool call of hugeText is after the context's last user
	// message, so what every compaction keeps is over the window.
	hugeTail         bool
	runEnded         bool // an agent_end awaits its decision
	detached         bool // the run in flight was cancelled from continuing
	aborting         bool // Abort was called: what the run in flight still reports decides nothing
	expect           *transitions.Rule
	expectRetryOK    bool
	compactionOpen   bool
	episodeCompacted bool
	episodeRecovered int
	retried          string // the ID of the message being retried

	prompt  chan error
	history []string
}

func newHarness(t *rapid.T, cov *coverage) *harness {
	cfg := policy.DefaultConfig()
	cfg.Retry.MaxRetries = rapid.SampledFrom([]int{0, 0, 1, 2, 3, 3, 4, 5, 6}).Draw(t, "maxRetries")
	cfg.Retry.BaseDelayMs = rapid.Int64Range(1, 5000).Draw(t, "baseDelayMs")
	cfg.Retry.MaxDelayMs = rapid.SampledFrom([]int64{0, 0, 3000, 20000}).Draw(t, "maxDelayMs")
	cfg.Retry.Jitter = rapid.SampledFrom([]float64{0, 0, 0.25, 1}).Draw(t, "jitter")
	cfg.Retry.HonorRetryAfter = rapid.Bool().Draw(t, "honorRetryAfter")
	cfg.Retry.Rules = rapid.SampledFrom([]classify.Rules{classify.Seed, classify.Extended}).Draw(t, "rules")
	cfg.Retry.WaitForReset = rapid.Bool().Draw(t, "waitForReset")
	cfg.Retry.MaxResetWaitMs = rapid.SampledFrom([]int64{0, 10000, 18000000}).Draw(t, "maxResetWaitMs")
	cfg.Compaction.KeepRecentTokens = 5
	seed := rapid.Uint64().Draw(t, "jitterSeed")
	rng := rand.New(rand.NewPCG(seed, seed))
	model := scripted.DefaultModel
	agent := scripted.New(scripted.Script{Model: model})
	s, err := session.New(agent, session.WithConfig(cfg), session.WithModel(model), session.WithSessionID("props"),
		session.WithRandom(rng.Float64), session.WithSummarizer(slowSummarizer{}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h := &harness{t: t, s: s, agent: agent, cfg: cfg, model: model, cov: cov, state: states.Idle}
	s.Subscribe(func(ev events.Event) {
		h.mu.Lock()
		h.evs = append(h.evs, ev)
		h.mu.Unlock()
	})
	// A first exchange, so that a later compaction has something to cut.
	if err := s.Prompt(context.Background(), "a first question, long enough to be worth compacting"); err != nil {
		t.Fatalf("warm-up prompt: %v", err)
	}
	return h
}

// drain lets the session settle (in fake time nothing moves until the test
// sleeps) and checks every new event against the model.
func (h *harness) drain() {
	synctest.Wait()
	h.mu.Lock()
	evs := h.evs[h.pos:]
	h.pos = len(h.evs)
	h.mu.Unlock()
	for _, ev := range evs {
		h.process(ev)
	}
}

// count is how many events were recorded.
func (h *harness) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.evs)
}

func (h *harness) fail(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf(format, args...)
}

// process checks one event against the model and advances the model.
func (h *harness) process(ev events.Event) {
	h.t.Helper()
	if h.expectRetryOK {
		end, isEnd := ev.(events.AutoRetryEnd)
		if !isEnd || !end.Success {
			h.fail("§3.5: the first success after a retry must end the chain at its message_end; got %T %+v", ev, ev)
		}
		h.expectRetryOK = false
	}
	switch e := ev.(type) {
	case events.AgentStart:
		h.detached = false
		h.last = nil
	case events.MessageEnd:
		m := e.Message
		if m.Role != transcript.RoleAssistant {
			return
		}
		if m.Text() == hugeText {
			h.hugeTail = true
		}
		h.last = &m
		if !m.IsError() {
			h.episodeCompacted = false
			h.episodeRecovered = 0
		}
		if m.StopReason != "error" && m.StopReason != "aborted" && h.chainOpen && !h.detached && !h.aborting {
			h.expectRetryOK = true
		}
	case events.AgentEnd:
		if !h.detached && !h.aborting {
			h.runEnded = true
		}
	case events.StateChange:
		h.stateChange(e)
	case events.AutoRetryStart:
		h.retryStart(e)
	case events.AutoRetryEnd:
		// §9.1: exactly one end per chain, with the chain's last attempt.
		if !h.chainOpen || e.Attempt != h.attempt {
			h.fail("§9.1: auto_retry_end attempt %d with the chain at %d (open %v)", e.Attempt, h.attempt, h.chainOpen)
		}
		h.chainOpen = false
		h.attempt = 0
	case events.AutoCompactionStart:
		if h.compactionOpen {
			h.fail("§9.6: auto_compaction_start before the previous one ended")
		}
		h.compactionOpen = true
	case events.AutoCompactionEnd:
		if !h.compactionOpen {
			h.fail("§9.6: auto_compaction_end without a start")
		}
		h.compactionOpen = false
	}
}

func (h *harness) stateChange(e events.StateChange) {
	h.t.Helper()
	i := slices.IndexFunc(transitions.Table(), func(r transitions.Rule) bool { return r.Trigger == e.Trigger })
	if i < 0 || e.From != h.state || !slices.Contains(transitions.Table()[i].From, e.From) || e.To != transitions.Table()[i].To {
		h.fail("§9.9: state_change %s>%s %s from model state %s does not follow the table", e.From, e.To, e.Trigger, h.state)
	}
	h.cov.add(edge{e.From, e.Trigger})
	if e.From == states.Classifying {
		if h.expect != nil && h.expect.Trigger != e.Trigger {
			h.fail("§9.9: the table predicts %s for the facts of the last message, the session took %s", h.expect.Trigger, e.Trigger)
		}
		if e.Trigger == transitions.Overflow {
			h.episodeRecovered++
			if h.episodeRecovered > 1 {
				h.fail("§9.6: an overflow episode was compacted twice")
			}
			h.episodeCompacted = true
		}
		h.expect = nil
	}
	if e.From == states.Idle && e.Trigger != transitions.AgentEnd && e.Trigger != transitions.CheckOverflow && e.Trigger != transitions.CheckThreshold &&
		e.Trigger != transitions.CheckRoom {
		h.fail("the check before a prompt took %s: it only compacts", e.Trigger)
	}
	if e.Trigger == transitions.AgentEnd {
		if !h.runEnded {
			h.fail("agent_end without a run that ended")
		}
		f := h.facts()
		r, ok := transitions.Table().Next(states.Classifying, &f)
		if !ok {
			h.fail("no rule for facts %+v", f)
		}
		h.expect = &r
		h.runEnded = false
	}
	if e.From == states.Continuing && e.Trigger == transitions.Cancel {
		h.detached = true
	}
	if e.To == states.Idle && (h.attempt != 0 || h.chainOpen) {
		h.fail("§9.4: the machine is idle with the counter at %d", h.attempt)
	}
	h.state = e.To
}

// facts are the guards' inputs as the model knows them at a run's end.
func (h *harness) facts() transitions.Facts {
	f := transitions.Facts{
		Signal: transitions.RunEnded, Started: true, RetryEnabled: h.cfg.Retry.Enabled, Attempt: h.attempt, MaxRetries: h.cfg.Retry.MaxRetries,
		CompactionEnabled: h.cfg.Compaction.Enabled, EpisodeCompacted: h.episodeCompacted,
		ContextWindow: h.model.ContextWindow, ReserveTokens: h.cfg.Compaction.ReserveTokens,
	}
	m := h.last
	if m == nil {
		return f
	}
	cls := h.classify(m)
	f.Class, f.Error, f.Aborted = cls.Class, m.StopReason == "error", m.StopReason == "aborted"
	f.SameModel = m.Provider == h.model.Provider && m.Model == h.model.ID
	f.TooLarge = m.ErrorMessage == overflowTexts[2] && h.hugeTail
	f.HintOverCap = h.cfg.Retry.HonorRetryAfter && cls.HasRetryAfter && h.cfg.Retry.MaxDelayMs > 0 &&
		cls.RetryAfter > time.Duration(h.cfg.Retry.MaxDelayMs)*time.Millisecond
	f.UsageLimit = cls.UsageLimit
	f.WaitForReset = h.cfg.Retry.WaitForReset
	f.ResetKnown = cls.HasRetryAfter
	f.ResetWithin = cls.HasRetryAfter && cls.RetryAfter <= time.Duration(h.cfg.Retry.MaxResetWaitMs)*time.Millisecond
	if m.Usage != nil {
		f.Tokens = m.Usage.TotalTokens
		if f.Tokens == 0 {
			f.Tokens = m.Usage.Input + m.Usage.Output + m.Usage.CacheRead + m.Usage.CacheWrite
		}
	}
	return f
}

func (h *harness) classify(m *transcript.Message) classify.Result {
	cm := classify.Message{StopReason: m.StopReason, ErrorMessage: m.ErrorMessage, ContextWindow: h.model.ContextWindow}
	if m.Usage != nil {
		cm.Usage = *m.Usage
	}
	return h.cfg.Retry.Rules.Classify(cm, time.Now())
}

func (h *harness) retryStart(e events.AutoRetryStart) {
	h.t.Helper()
	if !h.cfg.Retry.Enabled {
		h.fail("§9.5: auto_retry_start with retry disabled")
	}
	if h.last == nil {
		h.fail("auto_retry_start with no message to retry")
	}
	cls := h.classify(h.last)
	if scriptedOverflow(h.last, h.model.ContextWindow) {
		h.fail("§9.3: an overflow produced auto_retry_start")
	}
	// §9.1: attempts 1, 2, … within a chain; a new chain starts at 1.
	if (e.Attempt == 1) == h.chainOpen || (h.chainOpen && e.Attempt != h.attempt+1) {
		h.fail("§9.1: auto_retry_start attempt %d with the chain open %v at %d", e.Attempt, h.chainOpen, h.attempt)
	}
	if e.Attempt > h.cfg.Retry.MaxRetries {
		h.fail("§9.4: attempt %d exceeds maxRetries %d", e.Attempt, h.cfg.Retry.MaxRetries)
	}
	// §9.2: base × 2^(n−1), within the cap and the jitter; at least the
	// hint when hints are honoured. A wait for a reset waits the hint,
	// whatever the cap, or the chain's own delay when that is longer
	// (policy.md §3.8).
	full := h.cfg.Retry.BaseDelayMs
	for i := 1; i < e.Attempt; i++ {
		full = min(full*2, math.MaxInt64/4)
	}
	if h.cfg.Retry.MaxDelayMs > 0 {
		full = min(full, h.cfg.Retry.MaxDelayMs)
	}
	low := int64(float64(full)*(1-h.cfg.Retry.Jitter)) - 1
	high := full
	if !e.ResetAt.IsZero() {
		hint := cls.RetryAfter.Milliseconds()
		if h.cfg.Retry.HonorRetryAfter {
			low, high = max(low, hint), max(high, hint)
		}
		if !h.cfg.Retry.WaitForReset || !cls.HasRetryAfter || !(e.DelayMs == hint || (e.DelayMs > hint && e.DelayMs >= low && e.DelayMs <= high)) {
			h.fail("§3.8: attempt %d waits %d ms for a reset (waitForReset %v, hint %v, the chain's delay in [%d, %d])",
				e.Attempt, e.DelayMs, h.cfg.Retry.WaitForReset, cls.RetryAfter, low, high)
		}
		h.chainOpen = true
		h.attempt = e.Attempt
		h.retried = h.last.ID
		return
	}
	if h.cfg.Retry.HonorRetryAfter && cls.HasRetryAfter {
		hint := cls.RetryAfter.Milliseconds()
		low, high = max(low, hint), max(high, hint)
	}
	if e.DelayMs < low || e.DelayMs > high {
		h.fail("§9.2: attempt %d waits %d ms, outside [%d, %d]", e.Attempt, e.DelayMs, low, high)
	}
	h.chainOpen = true
	h.attempt = e.Attempt
	h.retried = h.last.ID
}

// checkContext is §9.10: history only grows, and the runtime context holds
// only messages of history, never the one being retried while it waits.
func (h *harness) checkContext() {
	h.t.Helper()
	var ids []string
	inHistory := map[string]bool{}
	for e, err := range h.s.History().Entries() {
		if err != nil {
			h.fail("§9.10: reading history: %v", err)
		}
		ids = append(ids, e.ID)
		inHistory[e.ID] = true
	}
	if len(ids) < len(h.history) || !slices.Equal(ids[:len(h.history)], h.history) {
		h.fail("§9.10: history changed its past: %v then %v", h.history, ids)
	}
	h.history = ids
	for _, m := range h.s.Messages() {
		if !inHistory[m.ID] {
			h.fail("§9.10: runtime message %s is not in history", m.ID)
		}
		if h.s.Status().State == states.Backoff && m.ID == h.retried {
			h.fail("§9.10: the retried message %s is still in the runtime context", m.ID)
		}
	}
}

// scriptedOverflow is the test's own knowledge of which messages are
// overflows: the texts and usages it scripted as such, independent of the
// classifier.
func scriptedOverflow(m *transcript.Message, window int) bool {
	if m.StopReason == "error" {
		return slices.Contains(overflowTexts, m.ErrorMessage)
	}
	return m.StopReason == "stop" && m.Usage != nil && m.Usage.Input+m.Usage.CacheRead > window
}

// The actions.

func (h *harness) Prompt(t *rapid.T) {
	if h.prompt != nil {
		// A turn that ended since is reaped here, not only by Settle: a
		// session then meets several prompts, and what one turn leaves
		// (an answer no summary can hold, an overflow not recovered)
		// reaches the next.
		h.drain()
		select {
		case <-h.prompt:
			h.prompt = nil
		default:
			t.Skip("a turn is in flight")
		}
	}
	h.agent.Append(drawCalls(t)...)
	// The prompt's user message, a cut point after any huge call, reaches
	// the context with no event of its own (the agent reports only what it
	// produces): a call left in the script by an aborted turn can answer
	// this prompt with the too-large overflow, and then it is an overflow.
	h.hugeTail = false
	h.episodeCompacted, h.episodeRecovered = false, 0
	h.prompt = make(chan error, 1)
	done := h.prompt
	go func() { done <- h.s.Prompt(context.Background(), "a question long enough to be worth compacting") }()
}

func (h *harness) Wait(t *rapid.T) {
	limit := rapid.SampledFrom([]int64{1000, 10000}).Draw(t, "limit")
	time.Sleep(time.Duration(rapid.Int64Range(0, limit).Draw(t, "ms")) * time.Millisecond)
}

// Step advances fake time until the session does something (a wait ends, a
// model call answers), so a continuation or a compaction is often in
// flight when the next action comes.
func (h *harness) Step(t *rapid.T) {
	h.drain()
	n := h.count()
	for range 3000 {
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if h.count() > n {
			return
		}
	}
}

// Settle waits for the turn in flight and checks §9.7.
func (h *harness) Settle(t *rapid.T) {
	if h.prompt == nil {
		t.Skip("no turn in flight")
	}
	for range 1000 {
		h.drain()
		select {
		case <-h.prompt:
			h.prompt = nil
			h.drain()
			if st := h.s.Status().State; st != states.Idle || h.s.Status().Attempt != 0 || h.s.Status().Retrying {
				h.fail("§9.7: Prompt returned with the machine %s, attempt %d", st, h.s.Status().Attempt)
			}
			before := h.count()
			time.Sleep(time.Hour)
			h.drain()
			if after := h.count(); after != before {
				h.fail("§9.7: %d events after Prompt returned", after-before)
			}
			return
		default:
			time.Sleep(time.Second)
		}
	}
	h.fail("the turn did not settle in 1000 s of fake time")
}

// AbortRetry checks §9.8.
func (h *harness) AbortRetry(t *rapid.T) {
	h.drain()
	before := h.s.Status().State
	n := h.count()
	h.s.AbortRetry()
	synctest.Wait()
	h.mu.Lock()
	added := slices.Clone(h.evs[n:])
	h.mu.Unlock()
	h.drain()
	if before != states.Backoff {
		if len(added) != 0 {
			h.fail("§9.8: AbortRetry in %s emitted %d events", before, len(added))
		}
		return
	}
	var cancelled bool
	for _, ev := range added {
		if end, ok := ev.(events.AutoRetryEnd); ok && !end.Success && end.FinalError == "Retry cancelled" {
			cancelled = true
		}
	}
	if !cancelled || h.state != states.Idle {
		h.fail("§9.8: AbortRetry in backoff: cancelled %v, state %s", cancelled, h.state)
	}
}

// Abort brings the model up to date first: once Abort is called, nothing
// the run in flight still reports can start a decision.
func (h *harness) Abort(t *rapid.T) {
	h.drain()
	h.aborting = true
	h.s.Abort()
	h.drain()
	h.aborting = false
}

func (h *harness) AbortCompaction(t *rapid.T) { h.s.AbortCompaction() }

// stepUntil advances fake time, 100 ms at a time for at most a minute,
// until the session is in state or no turn is in flight.
func (h *harness) stepUntil(state states.State) {
	for range 600 {
		h.drain()
		if st := h.s.Status().State; st == state || (st == states.Idle && h.prompt == nil) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// AbortBackoff waits for a backoff and cancels it: AbortRetry drawn at a
// random moment lands in one too rarely for cancel_retry to be taken in
// every round.
func (h *harness) AbortBackoff(t *rapid.T) {
	h.stepUntil(states.Backoff)
	h.AbortRetry(t)
}

// AbortContinuing waits for a continuation (after a backoff or an
// overflow's compaction) and aborts it: cancel from continuing.
func (h *harness) AbortContinuing(t *rapid.T) {
	h.stepUntil(states.Continuing)
	h.Abort(t)
}

// AbortCompacting waits for a compaction and cancels it, which also leaves
// an over-threshold answer for the check before the next prompt
// (check_threshold from idle).
func (h *harness) AbortCompacting(t *rapid.T) {
	h.stepUntil(states.Compacting)
	h.s.AbortCompaction()
}

func (h *harness) ToggleRetry(t *rapid.T) {
	h.drain()
	h.cfg.Retry.Enabled = !h.cfg.Retry.Enabled
	h.s.SetAutoRetryEnabled(h.cfg.Retry.Enabled)
}

func (h *harness) ToggleCompaction(t *rapid.T) {
	h.drain()
	h.cfg.Compaction.Enabled = !h.cfg.Compaction.Enabled
	h.s.SetAutoCompactionEnabled(h.cfg.Compaction.Enabled)
}

// Check runs after every action.
func (h *harness) Check(t *rapid.T) {
	h.drain()
	h.checkContext()
	if h.s.Status().State == states.Idle && h.s.Status().Attempt != 0 {
		h.fail("§9.4: idle with the counter at %d", h.s.Status().Attempt)
	}
	if h.s.Status().State != h.state {
		h.fail("§9.9: the session is in %s, the model in %s", h.s.Status().State, h.state)
	}
}

// modelled reports whether the model's actions can take a move: every move
// but those that need a credential store, Compact, a time budget (the
// model knows a jittered delay only within its range, and a budget's
// decision turns on the exact one) or a limiter shared by sessions, which
// TestReplayEveryPath takes, and policy's
// TestRetryChainNeverExceedsItsBounds for the budget, session's
// TestSharedDeadlineNeverRunThrough for the shared limit. Internal
// rules emit no state_change and are not counted.
func modelled(ev transitions.Trigger, from states.State) bool {
	switch ev {
	case transitions.RetryNow, transitions.Compact, transitions.CompactInBackoff, transitions.ExhaustElapsed, transitions.WaitShared:
		return false
	case transitions.Fallback, transitions.FallbackCompact:
		// The model's sessions run without the fallback setting; its
		// rules are played on a session in paths_test.go and driven at
		// random on the engine by policy's TestFallbackProperties.
		return false
	case transitions.Cancel:
		return from != states.Classifying
	}
	return true
}

func TestSessionModel(t *testing.T) {
	cov := &coverage{taken: map[edge]int{}}
	prop := func(t *rapid.T) {
		rapid.SyncTest(t, func(t *rapid.T) {
			h := newHarness(t, cov)
			defer h.s.Close()
			// Keys are drawn uniformly: the doubled ones make prompts,
			// time passing and aborts more frequent than the rest.
			t.Repeat(map[string]func(*rapid.T){
				"prompt":          h.Prompt,
				"prompt2":         h.Prompt,
				"wait":            h.Wait,
				"step":            h.Step,
				"step2":           h.Step,
				"step3":           h.Step,
				"settle":          h.Settle,
				"abortRetry":      h.AbortRetry,
				"abort":           h.Abort,
				"abort2":          h.Abort,
				"abortCompaction": h.AbortCompaction,
				"abortBackoff":    h.AbortBackoff,
				"abortCompacting": h.AbortCompacting,
				"abortContinuing": h.AbortContinuing,
				"toggleRetry":     h.ToggleRetry,
				"toggleCompact":   h.ToggleCompaction,
				"":                h.Check,
			})
		})
	}
	// Every move of the table the model drives must be taken at least once. The invariants
	// are checked on every run; a round that leaves a rule untaken is
	// followed by another, up to ten (reset_too_far, the rarest, was left
	// untaken after five once in a few dozen runs).
	var missing []string
	for round := 1; round <= 10; round++ {
		rapid.Check(t, prop)
		if t.Failed() {
			return
		}
		missing = missing[:0]
		for _, r := range transitions.Table() {
			for _, from := range r.From {
				if r.Internal(from) || !modelled(r.Trigger, from) {
					continue
				}
				if cov.taken[edge{from, r.Trigger}] == 0 {
					missing = append(missing, fmt.Sprintf("%s from %s", r.Trigger, from))
				}
			}
		}
		if len(missing) == 0 {
			t.Logf("every rule taken after %d round(s): %v", round, cov.taken)
			return
		}
		t.Logf("round %d left untaken: %v (counts: %v)", round, missing, cov.taken)
	}
	t.Errorf("rules never taken: %v (counts: %v)", missing, cov.taken)
}
