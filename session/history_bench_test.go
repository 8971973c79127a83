package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/session"
)

var heapTurns = flag.Int("heap-turns", 1000, "how many turns BenchmarkFileHistoryHeap measures")

// BenchmarkFileHistoryAppend appends what one step of a retry records (the
// failed message and its removal) to a FileHistory, and in the same loop
// writes the same bytes to a plain file with one write and one sync: the
// baseline. It reports both rates and their ratio (issue item 3).
// go test ./session -run '^$' -bench FileHistoryAppend -benchtime 2s
func BenchmarkFileHistoryAppend(b *testing.B) {
	dir := b.TempDir()
	h, err := session.OpenFileHistory(filepath.Join(dir, "h.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	plain, err := os.OpenFile(filepath.Join(dir, "plain.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	failed := session.Message{ID: "call-1", Role: session.RoleAssistant, StopReason: "error", ErrorMessage: "503 Service Unavailable",
		Provider: "p", Model: "m", Timestamp: 1700000000000, Usage: &session.Usage{Input: 1200, Output: 0, TotalTokens: 1200}}
	step := []session.Entry{
		{Type: session.EntryMessage, ID: failed.ID, Timestamp: failed.Timestamp, Message: &failed},
		{Type: session.EntryRemoval, ID: failed.ID, Timestamp: failed.Timestamp},
	}
	var lines bytes.Buffer
	enc := json.NewEncoder(&lines)
	enc.SetEscapeHTML(false)
	for _, e := range step {
		if err := enc.Encode(e); err != nil {
			b.Fatal(err)
		}
	}
	var inHistory, inPlain time.Duration
	n := 0
	for b.Loop() {
		start := time.Now()
		if err := h.Append(step...); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if _, err := plain.Write(lines.Bytes()); err != nil {
			b.Fatal(err)
		}
		if err := plain.Sync(); err != nil {
			b.Fatal(err)
		}
		inHistory, inPlain = inHistory+mid.Sub(start), inPlain+time.Since(mid)
		n++
	}
	b.ReportMetric(float64(n)/inHistory.Seconds(), "appends/s")
	b.ReportMetric(float64(n)/inPlain.Seconds(), "plain-writes/s")
	b.ReportMetric(inPlain.Seconds()/inHistory.Seconds(), "appends/plain")
}

// BenchmarkFileHistoryHeap plays a session on a FileHistory whose context
// is compacted every twenty-odd turns, until it has compacted a few
// times, then measures how much the heap (and the goroutine stacks) grew,
// after a collection, over -heap-turns more turns (issue item 2).
// go test ./session -run '^$' -bench FileHistoryHeap -benchtime 1x
func BenchmarkFileHistoryHeap(b *testing.B) {
	for b.Loop() {
		h, err := session.OpenFileHistory(filepath.Join(b.TempDir(), "h.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		model := session.Model{Provider: "scripted", ID: "scripted-1", ContextWindow: 60_000}
		agent := &sizedAgent{window: model.ContextWindow, answer: 2_000, tool: 4_000}
		s, err := session.New(agent, session.WithModel(model), session.WithHistory(h))
		if err != nil {
			b.Fatal(err)
		}
		var compactions atomic.Int64
		s.Subscribe(func(ev session.Event) {
			if e, ok := ev.(session.AutoCompactionEnd); ok && e.Result != nil {
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
		for turn < 200 || compactions.Load() < 3 {
			play()
		}
		s.Flush()
		warm := compactions.Load()
		before := memoryInUse()
		for range *heapTurns {
			play()
		}
		s.Flush()
		after := memoryInUse()
		b.ReportMetric((float64(after)-float64(before))/float64(*heapTurns), "B/turn")
		b.ReportMetric(float64(compactions.Load()-warm), "compactions")
		s.Close()
		h.Close()
	}
}
