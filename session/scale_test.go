package session_test

import (
	"context"
	"flag"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

var (
	scaleSessions    = flag.Int("sessions", 100_000, "how many sessions BenchmarkWaitingSessions starts")
	scaleSubscriber  = flag.Bool("subscriber", true, "give each session of BenchmarkWaitingSessions a subscriber")
	scaleHeapProfile = flag.String("waiting-heapprofile", "", "write a heap profile to this file once BenchmarkWaitingSessions's sessions all wait")
)

// BenchmarkWaitingSessions starts -sessions sessions on the scripted agent,
// drives each into a one-hour backoff, measures what a waiting session
// costs (heap and stacks, goroutines), then aborts every retry and measures
// the time from AbortRetry to the subscriber receiving auto_retry_end.
// The bytes are the sessions' own (their subscribers' functions included):
// each session's scripted agent, which an embedder would share between
// sessions, and the benchmark's own records are made before the first
// measure. -waiting-heapprofile writes the heap's profile once every
// session waits (run with -test.memprofilerate 1 to see every byte).
// Run it once: go test ./session -run '^$' -bench WaitingSessions -benchtime 1x
func BenchmarkWaitingSessions(b *testing.B) {
	n := *scaleSessions
	for b.Loop() {
		cfg := policy.DefaultConfig()
		cfg.Retry.BaseDelayMs = int64(time.Hour / time.Millisecond)
		// The benchmark's own: each session's scripted agent, and what
		// keeps track of the sessions. Made before the first measure, so
		// that the bytes measured are the sessions' alone.
		agents := make([]*scripted.Agent, n)
		for i := range agents {
			agents[i] = scripted.New(scripted.Script{Calls: []scripted.Call{{StopReason: "error", ErrorMessage: "503 Service Unavailable"}}})
		}
		sessions := make([]*session.Session, n)
		ended := make([]atomic.Int64, n) // when each saw auto_retry_end, in ns since start
		waiting := make(chan struct{}, n)
		before := memoryInUse()
		goroutinesBefore := runtime.NumGoroutine()

		start := time.Now()
		for i := range sessions {
			s, err := session.New(agents[i], session.WithConfig(cfg), session.WithSessionID("s"))
			if err != nil {
				b.Fatal(err)
			}
			if *scaleSubscriber {
				s.Subscribe(func(ev events.Event) {
					switch ev.(type) {
					case events.AutoRetryStart:
						waiting <- struct{}{}
					case events.AutoRetryEnd:
						ended[i].Store(int64(time.Since(start)))
					}
				})
			}
			if _, err := s.Send("hello"); err != nil {
				b.Fatal(err)
			}
			sessions[i] = s
		}
		for _, s := range sessions {
			if *scaleSubscriber {
				<-waiting
			} else {
				for !s.Status().Retrying {
					runtime.Gosched()
				}
			}
		}
		after := memoryInUse()
		if *scaleHeapProfile != "" {
			f, err := os.Create(*scaleHeapProfile)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		goroutines := runtime.NumGoroutine() - goroutinesBefore
		b.ReportMetric(float64(after-before)/float64(n), "bytes/session")
		b.ReportMetric(float64(goroutines)/float64(n), "goroutines/session")

		latencies := make([]time.Duration, n)
		for i, s := range sessions {
			t0 := time.Since(start)
			s.AbortRetry()
			if !*scaleSubscriber {
				latencies[i] = time.Since(start) - t0
				continue
			}
			for ended[i].Load() == 0 {
				runtime.Gosched()
			}
			latencies[i] = time.Duration(ended[i].Load()) - t0
		}
		slices.Sort(latencies)
		b.ReportMetric(float64(latencies[n/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(latencies[n*99/100].Nanoseconds()), "p99-ns")
		b.ReportMetric(float64(latencies[n-1].Nanoseconds()), "max-ns")

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for _, s := range sessions {
			s.Close()
		}
		cancel()
		_ = ctx
		runtime.KeepAlive(sessions)
		runtime.KeepAlive(agents)
	}
}

// memoryInUse is the heap and the goroutine stacks in use, after a
// collection.
func memoryInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}
