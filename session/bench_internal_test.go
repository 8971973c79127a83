package session

import (
	"runtime"
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/internal/baseline"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// benchSession is a session whose loop does not run: the benchmark feeds
// its engine itself, as the loop goroutine would, and starts no run.
func benchSession(b *testing.B) (*Session, policy.RunID) {
	cfg := policy.DefaultConfig()
	// No wait ends during the benchmark, however long it runs: the
	// decisions are made at the loop's start (its now), and a delay capped
	// at the default minute would fire the timers of the sessions waiting
	// in the pool a minute into a long run, and start runs of an agent
	// they do not have.
	cfg.Retry.BaseDelayMs, cfg.Retry.MaxDelayMs = 3_600_000, 3_600_000
	s := &Session{core: &core{history: &history.MemoryHistory{}, settings: &settings{summarizer: policy.DigestSummarizer{}, random: func() float64 { return 0 },
		logger: discardLogger}, done: make(chan struct{})}}
	var err error
	if s.x.engine, err = policy.New(policy.Setup{SessionID: "bench", Model: policy.Model{Provider: "p", ID: "m", ContextWindow: 200000}, Config: cfg}); err != nil {
		b.Fatal(err)
	}
	s.Subscribe(func(events.Event) {})
	// One decision and its cancellation first, so that what a session
	// makes once (its timer, its buffers) is made outside the measurement.
	now := time.Now()
	effects := s.x.engine.RunReturned(now, s.ended(b), policy.RunReturn{})
	for _, ef := range effects {
		if ef.Kind == policy.StartTimer && ef.Deadline.Sub(now) < time.Hour {
			b.Fatalf("the backoff ends in %v, within the benchmark's run", ef.Deadline.Sub(now))
		}
	}
	s.apply(effects)
	s.subs.wake()
	s.applyBut(s.x.engine.AbortRetry(time.Now()), policy.StartRun)
	s.Flush()
	return s, s.ended(b)
}

// ended starts a turn on s's engine and ends its run's call in a 503,
// carrying out every effect but the run itself; it returns the run.
func (s *Session) ended(b *testing.B) policy.RunID {
	now := time.Now()
	effects, err := s.x.engine.Prompt(now, "hi")
	if err != nil {
		b.Fatal(err)
	}
	var id policy.RunID
	for _, ef := range effects {
		if ef.Kind == policy.StartRun {
			id = ef.Run
		}
	}
	s.applyBut(effects, policy.StartRun)
	s.subs.wake() // as the loop does after each command
	m := transcript.Message{ID: "m-1", Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError,
		ErrorMessage: "503 Service Unavailable", Provider: "p", Model: "m", Usage: &transcript.Usage{Input: 100}}
	for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: m}, events.MessageEnd{Message: m}, events.AgentEnd{}} {
		s.applyBut(s.x.engine.RunEvent(now, id, ev), policy.StartRun)
		s.subs.wake()
	}
	s.Flush() // no delivery of the turn's events is left for the measurement
	return id
}

func (s *Session) applyBut(effects []policy.Effect, skip policy.EffectKind) {
	for i := range effects {
		if effects[i].Kind != skip {
			s.apply(effects[i : i+1])
		}
	}
}

// BenchmarkAgentEndDecision measures the decision at agent_end for a
// retryable error: from the run's return to the machine in backoff with
// auto_retry_start delivered to a subscriber (as the loop does at the end
// of its queue, on its own goroutine), the removal appended to history,
// the timer armed and the input's scratch given back (the wait itself
// excluded). It cycles through a pool of sessions whose runs have ended;
// bringing them back is outside the measurement, and adds a turn to each
// conversation (a few dozen messages after a run of a second: past the
// short context that keeps no position map). It measures the session's
// decision, not the benchmark's own work: the garbage of bringing the
// pool back is collected then too, outside the measurement.
func BenchmarkAgentEndDecision(b *testing.B) {
	type ready struct {
		s   *Session
		run policy.RunID
	}
	pool := make([]ready, 4096)
	for i := range pool {
		s, run := benchSession(b)
		pool[i] = ready{s, run}
	}
	defer func() {
		for _, r := range pool {
			r.s.x.stopTimer()
			r.s.subs.close(nil)
		}
	}()
	reset := func() {
		for i, r := range pool {
			if st := r.s.x.engine.Status(); st.State != "backoff" || st.Attempt != 1 {
				b.Fatalf("state %s, attempt %d", st.State, st.Attempt)
			}
			r.s.applyBut(r.s.x.engine.AbortRetry(time.Now()), policy.StartRun)
			r.s.subs.wake()
			pool[i].run = r.s.ended(b)
		}
		// The reset's garbage (a turn for each session of the pool) is
		// collected here, so that the collector's work during the
		// measurement is for what the decisions allocate.
		runtime.GC()
	}
	next := 0
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	// A counted loop rather than b.Loop: the pool's reset must stay out of
	// the measurement, and StopTimer inside b.Loop does not keep it out.
	for range b.N {
		if next == len(pool) {
			b.StopTimer()
			reset()
			next = 0
			b.StartTimer()
		}
		r := pool[next]
		r.s.apply(r.s.x.engine.RunReturned(now, r.run, policy.RunReturn{}))
		// As the loop does at the end of its queue: the decision is the
		// last of its inputs, and the session waits.
		r.s.subs.wakeLast()
		next++
	}
}

// BenchmarkLooplabEvent is the baseline the decision is compared with, in
// the same run: one bare looplab Event, on a two-state machine.
func BenchmarkLooplabEvent(b *testing.B) {
	event := baseline.LooplabEvent()
	b.ReportAllocs()
	for b.Loop() {
		if err := event(); err != nil {
			b.Fatal(err)
		}
	}
}
