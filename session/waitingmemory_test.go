package session_test

import (
	"math"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// TestWaitingSessionMemory: a session waiting out a backoff, with a
// subscriber, its turn's first run failed on a 503, keeps at most 3 KiB,
// 3,072 bytes (docs/performance.md, "Sessions at scale", where
// BenchmarkWaitingSessions measures the same at any count): 2,915 to
// 2,935 B, with or without -race, since the session's core fits in 512
// bytes (TestCoreSize); 3,056 B and more before. A count of
// bytes, not a time: it holds on a loaded machine. The agents are made
// before the first measure, as the benchmark's are, and a first round of
// sessions, not measured, makes what a process makes once (the runtime's
// tables of goroutines and timers). What else the process allocates
// meanwhile (the runtime, the race detector) can only add to a measure:
// the least of three rounds is the sessions' own.
func TestWaitingSessionMemory(t *testing.T) {
	const limit = 3072
	waitingSessionMemory(t, 200)
	least := math.Inf(1)
	for range 3 {
		least = min(least, waitingSessionMemory(t, 2000))
		if least <= limit {
			break
		}
	}
	t.Logf("%.0f bytes a waiting session", least)
	if least > limit {
		t.Errorf("a waiting session keeps %.0f bytes, more than %d", least, limit)
	}
}

// waitingSessionMemory starts n sessions into a one-hour backoff and
// returns the bytes each keeps.
func waitingSessionMemory(t *testing.T, n int) (per float64) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.DefaultConfig()
		cfg.Retry.BaseDelayMs = int64(time.Hour / time.Millisecond)
		agents := make([]*scripted.Agent, n)
		for i := range agents {
			agents[i] = scripted.New(scripted.Script{Calls: []scripted.Call{{StopReason: "error", ErrorMessage: "503 Service Unavailable"}}})
		}
		sessions := make([]*session.Session, n)
		waiting := make(chan struct{}, n)
		before := heapInUse()
		for i := range sessions {
			s, err := session.New(agents[i], session.WithConfig(cfg), session.WithSessionID("s"))
			if err != nil {
				t.Fatal(err)
			}
			s.Subscribe(func(ev events.Event) {
				if _, ok := ev.(events.AutoRetryStart); ok {
					waiting <- struct{}{}
				}
			})
			if _, err := s.Send("hello"); err != nil {
				t.Fatal(err)
			}
			sessions[i] = s
		}
		for range sessions {
			<-waiting
		}
		synctest.Wait() // every delivery goroutine has ended
		per = float64(heapInUse()-before) / float64(n)
		for _, s := range sessions {
			if !s.Status().Retrying {
				t.Fatalf("a session is not waiting: %+v", s.Status())
			}
		}
		for _, s := range sessions {
			s.Close()
		}
		runtime.KeepAlive(agents)
	})
	return per
}
