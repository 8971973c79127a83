package history_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/transcript"
)

// BenchmarkFileHistoryAppend appends what one step of a retry records (the
// failed message and its removal) to a FileHistory, and in the same loop
// writes the same bytes to a plain file with one write and one sync: the
// baseline. It reports both rates and their ratio (issue item 3).
// go test ./history -run '^$' -bench FileHistoryAppend -benchtime 2s
func BenchmarkFileHistoryAppend(b *testing.B) {
	dir := b.TempDir()
	h, err := history.OpenFileHistory(filepath.Join(dir, "h.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	plain, err := os.OpenFile(filepath.Join(dir, "plain.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	failed := transcript.Message{ID: "call-1", Role: transcript.RoleAssistant, StopReason: "error", ErrorMessage: "503 Service Unavailable",
		Provider: "p", Model: "m", Timestamp: 1700000000000, Usage: &transcript.Usage{Input: 1200, Output: 0, TotalTokens: 1200}}
	step := []transcript.Entry{
		{Type: transcript.EntryMessage, ID: failed.ID, Timestamp: failed.Timestamp, Message: &failed},
		{Type: transcript.EntryRemoval, ID: failed.ID, Timestamp: failed.Timestamp},
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
