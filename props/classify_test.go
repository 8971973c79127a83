package props_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transcript"
)

// seedOracle is docs/policy.md §2.1 pattern set compiled with Go's regexp,
// written by hand with the reference's JavaScript meaning spelled out: "."
// excludes the line terminators \n, \r, U+2028 and U+2029, and ".?" spans
// one UTF-16 code unit, so never a character above U+FFFF. Go's (?i) agrees
// with JavaScript's on every character the generator below draws; the two
// where they differ for these patterns' letters (ſ and the Kelvin sign) are
// pinned in classify's table tests.
var seedOracle = regexp.MustCompile(`(?i)overloaded|rate` + dotOpt + `limit|usage` + dotOpt + `limit|too many requests|429|500|502|503|504|service` +
	dotOpt + `unavailable|server error|internal error|connection` + dotOpt + `error|fetch failed|retry delay`)

const dotOpt = `[^\n\r\x{2028}\x{2029}\x{10000}-\x{10FFFF}]?`

// words are the patterns' words and near misses; separators include the
// characters where the dialects differ.
var (
	words = []string{
		"overloaded", "overload", "rate", "limit", "usage", "too", "many", "requests", "request", "429", "500", "502",
		"503", "504", "529", "1500", "service", "unavailable", "server", "error", "internal", "connection", "fetch",
		"failed", "retry", "delay", "prompt", "is", "long", "context", "length", "exceeded", "tokens", "quota",
		"ECONNRESET", "socket", "hang", "up", "retry-after:", "retry-after-ms=", "x-ratelimit-reset:", "throttling",
	}
	separators = []string{" ", " ", "", "_", "-", ".", "\r", "\n", "\u2028", "é", "😀", ": ", "  "}
	// phrases are the patterns' multi-word texts; the generator joins
	// their words with a random separator, which is where the patterns'
	// ".?" and literal spaces are tested.
	phrases = [][]string{
		{"rate", "limit"}, {"usage", "limit"}, {"too", "many", "requests"}, {"service", "unavailable"},
		{"server", "error"}, {"internal", "error"}, {"connection", "error"}, {"fetch", "failed"}, {"retry", "delay"},
	}
)

// errorText draws a text from the patterns' words with case changes and
// noise.
func errorText(t *rapid.T) string {
	n := rapid.IntRange(0, 8).Draw(t, "words")
	var b strings.Builder
	for i := range n {
		w := rapid.SampledFrom(words).Draw(t, "word")
		if rapid.Bool().Draw(t, "phrase") {
			phrase := rapid.SampledFrom(phrases).Draw(t, "phrase words")
			w = strings.Join(phrase, rapid.SampledFrom(separators).Draw(t, "inner"))
		}
		switch rapid.IntRange(0, 3).Draw(t, "case") {
		case 1:
			w = strings.ToUpper(w)
		case 2:
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		b.WriteString(w)
		if i < n-1 {
			b.WriteString(rapid.SampledFrom(separators).Draw(t, "sep"))
		}
		if rapid.IntRange(0, 5).Draw(t, "noise") == 0 {
			b.WriteString(rapid.StringMatching(`[0-9a-z ]{0,4}`).Draw(t, "junk"))
		}
	}
	return b.String()
}

// TestSeedEqualsPatternSet: for every text that is not an overflow, the seed
// rules call it retryable exactly when the §2.1 pattern set matches.
func TestSeedEqualsPatternSet(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rapid.Check(t, func(t *rapid.T) {
		text := errorText(t)
		m := classify.Message{StopReason: transcript.StopReasonError, ErrorMessage: text}
		if classify.Seed.Classify(m, now).Class == classify.Overflow {
			t.Skip("an overflow: the retry patterns are not consulted")
		}
		got := classify.Seed.Classify(m, now).Class == classify.Retryable
		want := text != "" && seedOracle.MatchString(text)
		if got != want {
			t.Fatalf("seed rules say retryable=%v, the pattern set says %v, for %q", got, want, text)
		}
	})
}

// TestOverflowNeverRetryable: under both rule sets, an overflow is never
// retryable and never carries retry data.
func TestOverflowNeverRetryable(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rapid.Check(t, func(t *rapid.T) {
		m := classify.Message{
			StopReason:    rapid.SampledFrom([]transcript.StopReason{"error", "error", "stop", "length"}).Draw(t, "stop"),
			ErrorMessage:  errorText(t) + rapid.SampledFrom([]string{"", " prompt is too long", " context_length_exceeded", " too many tokens"}).Draw(t, "tail"),
			Usage:         transcript.Usage{Input: rapid.IntRange(0, 300000).Draw(t, "input")},
			ContextWindow: rapid.SampledFrom([]int{0, 200000}).Draw(t, "window"),
		}
		seedOverflow := classify.Seed.Classify(m, now).Class == classify.Overflow
		for _, r := range []classify.Rules{classify.Seed, classify.Extended} {
			res := r.Classify(m, now)
			if seedOverflow && res.Class != classify.Overflow {
				t.Fatalf("%s: a seed overflow but class %s for %+v", r, res.Class, m)
			}
			if res.Class == classify.Overflow && (res.UsageLimit || res.HasRetryAfter) {
				t.Fatalf("%s: an overflow with retry data: %+v", r, res)
			}
		}
	})
}

// TestHintsNeverNegative: retry hints are never negative, whatever the
// numbers and the clock.
func TestHintsNeverNegative(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.SampledFrom([]string{"retry-after-ms", "retry-after", "x-ratelimit-reset-ms", "x-ratelimit-reset", "Retry-After"}).Draw(t, "name")
		value := rapid.OneOf(
			rapid.StringMatching(`[0-9]{1,25}`),
			rapid.StringMatching(`[0-9]{1,4}\.[0-9]{0,3}`),
			rapid.StringMatching(`20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]Z`),
			rapid.StringMatching(`-?[a-z0-9.]{0,6}`),
		).Draw(t, "value")
		text := errorText(t) + " " + name + rapid.SampledFrom([]string{": ", "=", " : ", ":"}).Draw(t, "sep") + value
		now := time.Unix(rapid.Int64Range(0, 4_000_000_000).Draw(t, "now"), 0)
		d, ok := classify.RetryAfter(text, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("RetryAfter(%q) = %v, %v", text, d, ok)
		}
	})
}
