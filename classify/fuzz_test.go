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

// FuzzHints feeds arbitrary text and one arbitrary header to the hint
// readers (issue 24): no panic, never negative, nothing when not ok, the
// same answer twice, and an absolute reset never more than a year away.
// Run it longer with:
// go test ./classify -run '^$' -fuzz FuzzHints -fuzztime 60s
func FuzzHints(f *testing.F) {
	for _, s := range [][3]string{
		{"Please try again in 1h2m3.5s.", "retry-after", "Sun, 29 Nov 2026 12:01:00 GMT"},
		{"Your limit will reset at 3pm (America/New_York).", "anthropic-ratelimit-tokens-reset", "2026-11-29T12:00:30Z"},
		{"Claude AI usage limit reached|1767225600", "x-ratelimit-reset-tokens", "6m0s"},
		{`'retryDelay': '59s'`, "retry-after-ms", "99999999999999999999"},
		{"resets 12:50am (Etc/GMT+5)", "x-ratelimit-reset", "1999999999"},
		{"try again in 2 hours, 3 minutes and 4 seconds", "anthropic-ratelimit-requests-remaining", "0"},
		{`"resets_at": 9999999999`, "X-RateLimit-Reset-Requests", "1s"},
	} {
		f.Add(s[0], s[1], s[2], int64(1_800_000_000))
	}
	f.Fuzz(func(t *testing.T, text, name, value string, unix int64) {
		now := time.Unix(unix, 0)
		d, ok := classify.RetryAfter(text, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("RetryAfter = %v, %v", d, ok)
		}
		if again, againOK := classify.RetryAfter(text, now); again != d || againOK != ok {
			t.Fatalf("not deterministic: %v, %v then %v, %v", d, ok, again, againOK)
		}
		m := classify.Message{StopReason: transcript.StopReasonError, Status: 429, ErrorMessage: text,
			Headers: map[string]string{name: value, "anthropic-ratelimit-requests-reset": value}}
		r := classify.Extended.Classify(m, now)
		if r.RetryAfter < 0 || (!r.HasRetryAfter && r.RetryAfter != 0) {
			t.Fatalf("Classify's hint = %v, %v", r.RetryAfter, r.HasRetryAfter)
		}
		// An RFC 3339 reset is absolute: in the past it is 0, more than a
		// year ahead it is no hint.
		only := classify.Message{StopReason: transcript.StopReasonError, Status: 429,
			Headers: map[string]string{"anthropic-ratelimit-tokens-reset": value}}
		if r := classify.Extended.Classify(only, now); r.RetryAfter > 366*24*time.Hour {
			t.Fatalf("a reset %v away from %q", r.RetryAfter, value)
		}
	})
}
