package classify_test

import (
	"os"
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transcript"
)

// pagePath is the benchmark's 64 KiB error page.
const pagePath = "testdata/page-64k.html"

func corpusMessages(b *testing.B) []classify.Message {
	rows, err := loadCorpus()
	if err != nil {
		b.Fatalf("corpus: %v", err)
	}
	var msgs []classify.Message
	for _, r := range rows {
		if r.set == originalSet {
			msgs = append(msgs, classify.Message{StopReason: transcript.StopReasonError, ErrorMessage: r.message})
		}
	}
	if len(msgs) != 83 {
		b.Fatalf("the original set has %d rows, want 83", len(msgs))
	}
	return msgs
}

func pageMessage(b *testing.B) classify.Message {
	data, err := os.ReadFile(pagePath)
	if err != nil {
		b.Fatalf("page: %v", err)
	}
	return classify.Message{StopReason: transcript.StopReasonError, ErrorMessage: string(data)}
}

var sink classify.Result

func benchCorpus(b *testing.B, r classify.Rules) {
	msgs := corpusMessages(b)
	now := time.Unix(1_800_000_000, 0)
	b.ReportAllocs()
	for b.Loop() {
		for _, m := range msgs {
			sink = r.Classify(m, now)
		}
	}
}

func benchPage(b *testing.B, r classify.Rules) {
	m := pageMessage(b)
	now := time.Unix(1_800_000_000, 0)
	b.SetBytes(int64(len(m.ErrorMessage)))
	b.ReportAllocs()
	for b.Loop() {
		sink = r.Classify(m, now)
	}
}

// One op: every message of the original 83-row corpus once (the set
// "original": the figures stay comparable as the corpus grows).
func BenchmarkClassifySeedCorpus(b *testing.B)     { benchCorpus(b, classify.Seed) }
func BenchmarkClassifyExtendedCorpus(b *testing.B) { benchCorpus(b, classify.Extended) }

// One op: the 64 KiB page once.
func BenchmarkClassifySeedPage(b *testing.B)     { benchPage(b, classify.Seed) }
func BenchmarkClassifyExtendedPage(b *testing.B) { benchPage(b, classify.Extended) }
