package session

import (
	"testing"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/transitions"
)

// benchSession is a session whose loop does not run: the benchmark calls
// the loop's handlers itself, as the loop goroutine would.
func benchSession() *Session {
	s := &Session{
		id: "bench", history: &MemoryHistory{}, summarizer: DigestSummarizer{},
		random: func() float64 { return 0 }, model: Model{Provider: "p", ID: "m", ContextWindow: 200000},
	}
	s.loop.cfg = DefaultConfig()
	s.loop.cfg.Retry.BaseDelayMs = 3_600_000 // no wait ends during the benchmark
	s.loop.machine = fsm.Default()
	s.loop.seq = map[string]int{}
	s.Subscribe(func(Event) {})
	return s
}

// BenchmarkAgentEndDecision measures the decision at agent_end for a
// retryable error: from the run's end to the machine in backoff with
// auto_retry_start emitted to a subscriber and the subscriber woken (the
// wait itself excluded). It cycles through a pool of sessions so that
// putting them back to idle happens rarely, outside the measurement.
func BenchmarkAgentEndDecision(b *testing.B) {
	pool := make([]*Session, 1024)
	for i := range pool {
		pool[i] = benchSession()
	}
	defer func() {
		for _, s := range pool {
			s.subs.close()
		}
	}()
	m := &Message{ID: "m-1", Role: RoleAssistant, StopReason: classify.StopReasonError,
		ErrorMessage: "503 Service Unavailable", Provider: "p", Model: "m", Usage: &Usage{Input: 100}}
	reset := func() {
		for _, s := range pool {
			if s.loop.machine.State() != "backoff" || s.loop.attempt != 1 {
				b.Fatalf("state %s, attempt %d", s.loop.machine.State(), s.loop.attempt)
			}
			s.stopTimer()
			s.step(transitions.Facts{Signal: transitions.AbortRetryCalled})
			s.step(transitions.Facts{})
			s.loop.attempt = 0
		}
	}
	next := 0
	b.ReportAllocs()
	for b.Loop() {
		if next == len(pool) {
			b.StopTimer()
			reset()
			next = 0
			b.StartTimer()
		}
		s := pool[next]
		s.decide(m, transitions.RunEnded)
		s.subs.wake() // as the loop does after each command
		next++
	}
}
