package policy_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/baseline"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// The engine's costs, each read beside BenchmarkLooplabEvent measured in the
// same run (docs/performance.md): a ratio holds on a shared machine where
// an absolute time does not.

// BenchmarkLooplabEvent is the baseline: one bare looplab Event, on a
// two-state machine.
func BenchmarkLooplabEvent(b *testing.B) {
	event := baseline.LooplabEvent()
	b.ReportAllocs()
	for b.Loop() {
		if err := event(); err != nil {
			b.Fatal(err)
		}
	}
}

var benchFailure = func() transcript.Message {
	m := answer(transcript.StopReasonError, "503 Service Unavailable")
	return m
}()

var benchSuccess = answer(transcript.StopReasonStop, "done")

// ended returns a run of e that ended on a transient error and has not yet
// returned. Each input's effects are released, as a driver does once it
// has carried them out.
func ended(b testing.TB, e *policy.Engine, at time.Time) policy.RunID {
	effects, err := e.Prompt(at, "hi")
	if err != nil {
		b.Fatal(err)
	}
	run := runOfB(b, effects)
	e.Release()
	for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: benchFailure}, events.MessageEnd{Message: benchFailure}, events.AgentEnd{}} {
		e.RunEvent(at, run, ev)
		e.Release()
	}
	return run
}

func runOfB(b testing.TB, effects []policy.Effect) policy.RunID {
	for _, ef := range effects {
		if ef.Kind == policy.StartRun {
			return ef.Run
		}
	}
	b.Fatal("no run started")
	return 0
}

// BenchmarkDecision is the decision at a run's end on a transient error:
// from RunReturned to the machine in backoff, auto_retry_start and the
// timer among the effects. Each op finds the same engine state: a new
// engine whose first prompt's run ended on a 503, out of the processor's
// cache (the benchmark cycles through a pool of 1,024 of them). When the
// pool is used up, it is filled again with new engines, outside the
// measurement: an engine taken through another prompt would carry a longer
// context, and each op would measure more than the one before.
func BenchmarkDecision(b *testing.B) {
	type ready struct {
		e   *policy.Engine
		run policy.RunID
	}
	pool := make([]ready, 1024)
	at := t0
	fill := func() {
		for i := range pool {
			e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig()})
			if err != nil {
				b.Fatal(err)
			}
			pool[i] = ready{e, ended(b, e, at)}
		}
		// The garbage of filling the pool (the engines it replaces) is
		// collected here, so that the collector's work during the
		// measurement is for what the decisions allocate, as in the
		// session's BenchmarkAgentEndDecision.
		runtime.GC()
	}
	fill()
	next := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if next == len(pool) {
			b.StopTimer()
			fill()
			next = 0
			b.StartTimer()
		}
		r := pool[next]
		r.e.RunReturned(at, r.run, policy.RunReturn{Draw: 0.5})
		r.e.Release() // as the driver does once it has carried them out
		next++
	}
}

// BenchmarkTurnWithThreeRetries is one whole turn on the engine alone: a
// prompt, three transient errors with their backoffs, and a success. A
// turn adds two messages to the engine's context (the prompt and the
// answer), so the turns are played on an engine made new, outside the
// measurement, every turnsPerEngine turns: each op finds a context of at
// most a few hundred messages, rather than one that grows with b.N and
// makes the op measure the benchmark's own heap.
func BenchmarkTurnWithThreeRetries(b *testing.B) {
	const turnsPerEngine = 256
	fresh := func() *policy.Engine {
		e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig()})
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	e := fresh()
	at := t0
	turn := newTurnPlayer()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i > 0 && i%turnsPerEngine == 0 {
			b.StopTimer()
			e = fresh()
			b.StartTimer()
		}
		at = turn.play(b, e, at)
	}
}

// turnPlayer plays a turn with three retries. The agent's events are made
// once: what the agent allocates is not the engine's cost.
type turnPlayer struct{ failing, succeeding []events.Event }

func newTurnPlayer() turnPlayer {
	runEvents := func(m transcript.Message) []events.Event {
		return []events.Event{events.AgentStart{}, events.MessageStart{Message: m}, events.MessageEnd{Message: m}, events.AgentEnd{}}
	}
	return turnPlayer{runEvents(benchFailure), runEvents(benchSuccess)}
}

// play plays the turn on e from at: a prompt, three transient errors with
// their backoffs, and a success. It returns the time the turn ended. Each
// input's effects are released once read, as a driver does once it has
// carried them out.
func (p turnPlayer) play(tb testing.TB, e *policy.Engine, at time.Time) time.Time {
	effects, err := e.Prompt(at, "hi")
	if err != nil {
		tb.Fatal(err)
	}
	run := runOfB(tb, effects)
	e.Release()
	for i := range 4 {
		evs := p.failing
		if i == 3 {
			evs = p.succeeding
		}
		for _, ev := range evs {
			e.RunEvent(at, run, ev)
			e.Release()
		}
		effects = e.RunReturned(at, run, policy.RunReturn{Draw: 0.5})
		if i == 3 {
			e.Release()
			break
		}
		var timer policy.TimerID
		var deadline time.Time
		for _, ef := range effects {
			if ef.Kind == policy.StartTimer {
				timer, deadline = ef.Timer, ef.Deadline
			}
		}
		e.Release()
		at = deadline
		run = runOfB(tb, e.TimerFired(at, timer))
		e.Release()
	}
	return at
}
