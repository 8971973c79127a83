package session_test

import (
	"context"
	"flag"
	"fmt"
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

// BenchmarkTurnCost plays -cost-turns turns (20,000 by default) of the
// scripted agent's default answer on a session that never compacts (its
// usage stays far below the window), so the runtime context grows by two
// messages a turn, and reports the mean time of a turn among the first
// thousand and among the last thousand: a turn must cost the same whatever
// the context's length (issue item 1). The history discards, so that the
// figure is the session's own.
// Run it once: go test ./session -run '^$' -bench TurnCost -benchtime 1x
func BenchmarkTurnCost(b *testing.B) {
	for b.Loop() {
		s, err := session.New(scripted.New(scripted.Script{}), session.WithModel(scripted.DefaultModel),
			session.WithHistory(discardHistory{}))
		if err != nil {
			b.Fatal(err)
		}
		clock := newTurnClock(*costTurns)
		for i := range *costTurns {
			clock.time(i, func() {
				if err := s.Prompt(context.Background(), fmt.Sprint("question ", i)); err != nil {
					b.Fatalf("turn %d: %v", i, err)
				}
			})
		}
		if n, want := s.MessageCount(), 2**costTurns; n != want {
			b.Fatalf("the context holds %d messages, not %d: it was compacted", n, want)
		}
		s.Close()
		clock.report(b)
	}
}
