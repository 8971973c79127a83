package session_test

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

var costTurns = flag.Int("cost-turns", 20_000, "how many turns BenchmarkTurnCost plays")

// turnClock times the turns of a session: the first and the last
// thousand (or tenth, for fewer than 10,000 turns).
type turnClock struct {
	turns, window int
	early, late   []time.Duration
}

func newTurnClock(turns int) *turnClock {
	w := min(1000, max(turns/10, 1))
	return &turnClock{turns: turns, window: w, early: make([]time.Duration, 0, w), late: make([]time.Duration, 0, w)}
}

// time runs turn number i, timing it when it is an early or a late one.
func (c *turnClock) time(i int, turn func()) {
	if i >= c.window && i < c.turns-c.window {
		turn()
		return
	}
	start := time.Now()
	turn()
	if i < c.window {
		c.early = append(c.early, time.Since(start))
	} else {
		c.late = append(c.late, time.Since(start))
	}
}

// report reports the time of an early and of a late turn in µs, mean and
// median, and the late one's ratio to the early one. The medians are the
// figure to read on a shared machine: a mean over a thousand turns of a
// few tens of µs moves with whatever else the machine runs meanwhile.
func (c *turnClock) report(b *testing.B) {
	mean := func(ds []time.Duration) float64 {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return float64(sum.Nanoseconds()) / 1e3 / float64(len(ds))
	}
	median := func(ds []time.Duration) float64 {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Nanoseconds()) / 1e3
	}
	b.ReportMetric(mean(c.early), "early-mean-µs/turn")
	b.ReportMetric(mean(c.late), "late-mean-µs/turn")
	b.ReportMetric(mean(c.late)/mean(c.early), "late/early-mean")
	b.ReportMetric(median(c.early), "early-median-µs/turn")
	b.ReportMetric(median(c.late), "late-median-µs/turn")
	b.ReportMetric(median(c.late)/median(c.early), "late/early-median")
}

// BenchmarkTurnCost measures whether a turn costs the same whatever the
// length of the context (issue item 1). It plays -cost-turns turns (20,000
// by default) of the scripted agent's default answer on a session that
// never compacts (its usage stays far below the window), so that its
// runtime context grows by two messages a turn. The first turns are those
// of a second, new session, played in step with the last ones, a turn of
// each in turn, so that whatever else the machine runs weighs on both
// alike. It reports the time of a turn among the first thousand and among
// the last thousand, mean and median, and the ratios. The histories
// discard, so that the figure is the session's own.
// Run it once: go test ./session -run '^$' -bench TurnCost -benchtime 1x
func BenchmarkTurnCost(b *testing.B) {
	newSession := func() *session.Session {
		s, err := session.New(scripted.New(scripted.Script{}), session.WithModel(scripted.DefaultModel),
			session.WithHistory(discardHistory{}))
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	prompt := func(s *session.Session, i int) {
		if err := s.Prompt(context.Background(), fmt.Sprint("question ", i)); err != nil {
			b.Fatalf("turn %d: %v", i, err)
		}
	}
	for b.Loop() {
		long, short := newSession(), newSession()
		clock := newTurnClock(*costTurns)
		first := *costTurns - clock.window
		for i := range first {
			prompt(long, i)
		}
		for i := range clock.window {
			clock.time(i, func() { prompt(short, i) })
			clock.time(first+i, func() { prompt(long, first+i) })
		}
		if n, want := long.Status().MessageCount, 2**costTurns; n != want {
			b.Fatalf("the context holds %d messages, not %d: it was compacted", n, want)
		}
		long.Close()
		short.Close()
		clock.report(b)
	}
}

// totalAlloc is how many bytes the process has allocated so far.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}
