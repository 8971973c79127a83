package session_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
)

var heapTurns = flag.Int("heap-turns", 2000, "how many turns BenchmarkFileHistoryHeap measures")

// BenchmarkFileHistoryHeap plays a session on a FileHistory whose context
// is compacted every twenty-odd turns, until the summary has grown to its
// bound, then measures the heap after a collection on the turn of every compaction over -heap-turns more turns
// (or a few more, up to a compaction), so that the context is at the same
// point of its cycle each time. It reports the growth per turn as the
// slope of the least-squares line through those measures, and as the
// difference between the first and the last (issue item 2).
// go test ./session -run '^$' -bench FileHistoryHeap -benchtime 1x
func BenchmarkFileHistoryHeap(b *testing.B) {
	for b.Loop() {
		h, err := history.OpenFileHistory(filepath.Join(b.TempDir(), "h.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		model := policy.Model{Provider: "scripted", ID: "scripted-1", ContextWindow: 60_000}
		agent := &sizedAgent{window: model.ContextWindow, answer: 2_000, tool: 4_000}
		s, err := session.New(agent, session.WithModel(model), session.WithHistory(h))
		if err != nil {
			b.Fatal(err)
		}
		var compactions, summary atomic.Int64
		s.Subscribe(func(ev events.Event) {
			if e, ok := ev.(events.AutoCompactionEnd); ok && e.Result != nil {
				summary.Store(int64(len(e.Result.Summary)))
				compactions.Add(1)
			}
		})
		turn := 0
		play := func() {
			if err := s.Prompt(context.Background(), fmt.Sprintf("question %d: %s", turn, strings.Repeat("q", 400))); err != nil {
				b.Fatalf("turn %d: %v", turn, err)
			}
			turn++
		}
		// Each measure is taken on the turn of a compaction, so that the
		// context is at the same point of its cycle both times.
		untilCompaction := func() {
			s.Flush()
			for n := compactions.Load(); ; {
				play()
				s.Flush()
				if compactions.Load() > n {
					return
				}
			}
		}
		// The summary grows with each compaction up to its bound: the
		// measures start once it is there.
		for summary.Load() < sizes.DigestChars*9/10 {
			untilCompaction()
		}
		warm, from := compactions.Load(), turn
		var at, inUse []float64
		for {
			at, inUse = append(at, float64(turn)), append(inUse, float64(heapInUse()))
			if turn >= from+*heapTurns {
				break
			}
			untilCompaction()
		}
		n := len(at) - 1
		b.ReportMetric(slope(at, inUse), "B/turn")
		b.ReportMetric((inUse[n]-inUse[0])/(at[n]-at[0]), "B/turn-first-to-last")
		b.ReportMetric(float64(compactions.Load()-warm), "compactions")
		b.ReportMetric(at[n]-at[0], "turns")
		s.Close()
		h.Close()
	}
}

// slope is the slope of the least-squares line through the points (x, y).
func slope(x, y []float64) float64 {
	var mx, my float64
	for i := range x {
		mx, my = mx+x[i], my+y[i]
	}
	mx, my = mx/float64(len(x)), my/float64(len(y))
	var num, den float64
	for i := range x {
		num += (x[i] - mx) * (y[i] - my)
		den += (x[i] - mx) * (x[i] - mx)
	}
	return num / den
}

// heapInUse is the heap in use, after a collection.
func heapInUse() uint64 {
	// Twice: the first collection moves what sync.Pools hold to their
	// victim caches, the second frees it. A pool's cache (the policy
	// engine's scratches, the steps its actions are handed) is the
	// process's, bounded by how many inputs were in progress at once, not
	// any session's.
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
