package classify_test

import (
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/classify"
)

var hintSink time.Duration

// BenchmarkRetryAfterShort reads the retry hint of a short error text that
// holds none, as the decision at a run's end does for a 503
// (docs/performance.md).
func BenchmarkRetryAfterShort(b *testing.B) {
	now := time.Now()
	for b.Loop() {
		d, _ := classify.RetryAfter("503 Service Unavailable", now)
		hintSink += d
	}
}

// BenchmarkRetryAfterCorpus reads the retry hint of every text of the
// corpus, one op each text.
func BenchmarkRetryAfterCorpus(b *testing.B) {
	rows, err := loadCorpus()
	if err != nil {
		b.Fatalf("corpus: %v", err)
	}
	now := time.Now()
	b.ResetTimer()
	for b.Loop() {
		for _, r := range rows {
			d, _ := classify.RetryAfter(r.message, now)
			hintSink += d
		}
	}
}
