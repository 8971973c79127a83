package classify_test

import (
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transcript"
)

// FuzzClassify feeds arbitrary messages to both rule sets: no panic, a valid
// class, no retry data on an overflow, every seed overflow an extended one,
// the same answer twice and from Explain, hints never negative. Run it longer
// with: go test ./classify -run '^$' -fuzz FuzzClassify -fuzztime 60s
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		"503 Service Unavailable", "prompt is too long", "Throttling error: Too many tokens, please wait",
		"429 rate limit; retry-after: 3", "x-ratelimit-reset: 1999999999", "insufficient_quota",
		"400 status code (no body)", "rate\rlimit", "\xff\xfe", "",
	} {
		f.Add(s, "error", 0, 0, 0)
	}
	rows, _ := loadCorpus() // seeds only: a missing corpus loses nothing
	for _, r := range rows {
		f.Add(r.message, "error", 0, 0, 0)
	}
	f.Add("", "stop", 0, 250000, 200000)
	f.Add("", "length", 0, 199000, 200000)
	f.Add("", "error", 529, 0, 0)
	f.Fuzz(func(t *testing.T, text, stop string, status, input, window int) {
		m := classify.Message{
			StopReason: transcript.StopReason(stop), ErrorMessage: text, Status: status,
			Usage: transcript.Usage{Input: input}, ContextWindow: window,
		}
		now := time.Unix(1_800_000_000, 0)
		seed := classify.Seed.Classify(m, now)
		ext := classify.Extended.Classify(m, now)
		for _, r := range []classify.Result{seed, ext} {
			if !r.Class.Valid() {
				t.Fatalf("invalid class %d", r.Class)
			}
			if r.Class == classify.Overflow && (r.UsageLimit || r.HasRetryAfter) {
				t.Fatalf("an overflow with retry data: %+v", r)
			}
			if r.RetryAfter < 0 {
				t.Fatalf("negative hint %v", r.RetryAfter)
			}
		}
		// The extended rules recognise more overflow wordings than the seed
		// rules, never fewer: the two need not agree, but a seed overflow
		// is an extended one.
		if seed.Class == classify.Overflow && ext.Class != classify.Overflow {
			t.Fatalf("seed says overflow, extended says %s", ext.Class)
		}
		if status != 429 && classify.IsOverflow(m) && seed.Class != classify.Overflow {
			t.Fatalf("IsOverflow but classified %s", seed.Class)
		}
		if res, _ := classify.Seed.Explain(m, now); res != seed {
			t.Fatalf("Explain says %+v, Classify %+v", res, seed)
		}
		if res, _ := classify.Extended.Explain(m, now); res != ext {
			t.Fatalf("Explain says %+v, Classify %+v", res, ext)
		}
		if again := classify.Seed.Classify(m, now); again != seed {
			t.Fatalf("not deterministic: %+v then %+v", seed, again)
		}
		if again := classify.Extended.Classify(m, now); again != ext {
			t.Fatalf("not deterministic: %+v then %+v", ext, again)
		}
		if d, ok := classify.RetryAfter(text, now); d < 0 || (!ok && d != 0) {
			t.Fatalf("RetryAfter = %v, %v", d, ok)
		}
	})
}
