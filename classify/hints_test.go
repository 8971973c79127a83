package classify_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transcript"
)

// rfc is the RFC 3339 time d from now, as Anthropic's reset headers give it.
func rfc(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }

// Issue 24: the reset times the providers send, in headers. Each case is
// the headers of one failed call; the hint is what Classify reads of them.
func TestHeaderResetHints(t *testing.T) {
	const (
		req, tok, in, out = "anthropic-ratelimit-requests", "anthropic-ratelimit-tokens", "anthropic-ratelimit-input-tokens", "anthropic-ratelimit-output-tokens"
	)
	cases := []struct {
		name    string
		headers map[string]string
		want    time.Duration
		ok      bool
	}{
		{"retry-after-ms", map[string]string{"retry-after-ms": "1500"}, 1500 * time.Millisecond, true},
		{"retry-after in seconds", map[string]string{"retry-after": "20"}, 20 * time.Second, true},
		{"retry-after as an HTTP date", map[string]string{"retry-after": now.Add(90 * time.Second).Format(time.RFC1123)}, 90 * time.Second, true},
		{"retry-after as an HTTP date in the past", map[string]string{"retry-after": now.Add(-time.Hour).Format(time.RFC1123)}, 0, true},

		// Anthropic: the latest reset among the exhausted limits.
		{"anthropic, both exhausted: the later", map[string]string{
			req + "-remaining": "0", req + "-reset": rfc(10 * time.Second),
			tok + "-remaining": "0", tok + "-reset": rfc(time.Minute)}, time.Minute, true},
		{"anthropic, the requests exhausted: theirs, though the tokens reset later", map[string]string{
			req + "-remaining": "0", req + "-reset": rfc(10 * time.Second),
			tok + "-remaining": "16000", tok + "-reset": rfc(time.Minute)}, 10 * time.Second, true},
		{"anthropic, the output tokens exhausted", map[string]string{
			req + "-remaining": "40", req + "-reset": rfc(time.Second),
			in + "-remaining": "30000", in + "-reset": rfc(2 * time.Second),
			out + "-remaining": "0", out + "-reset": rfc(30 * time.Second)}, 30 * time.Second, true},
		{"anthropic, the input tokens exhausted", map[string]string{
			in + "-remaining": "0", in + "-reset": rfc(45 * time.Second),
			out + "-remaining": "8000", out + "-reset": rfc(50 * time.Second)}, 45 * time.Second, true},
		{"anthropic, no counts: the latest", map[string]string{
			req + "-reset": rfc(10 * time.Second), tok + "-reset": rfc(time.Minute)}, time.Minute, true},
		{"anthropic, no count is 0: the latest", map[string]string{
			req + "-remaining": "3", req + "-reset": rfc(10 * time.Second),
			tok + "-remaining": "100", tok + "-reset": rfc(time.Minute)}, time.Minute, true},
		{"anthropic, fractional seconds", map[string]string{tok + "-reset": now.Add(1500 * time.Millisecond).Format(time.RFC3339Nano)}, 1500 * time.Millisecond, true},
		{"anthropic, in the past", map[string]string{tok + "-reset": rfc(-time.Minute)}, 0, true},
		{"anthropic, a malformed time is ignored", map[string]string{
			req + "-remaining": "0", req + "-reset": "2026-13-45T99:00:00Z",
			tok + "-reset": rfc(time.Minute)}, time.Minute, true},
		{"anthropic, ten years ahead is ignored", map[string]string{
			req + "-remaining": "0", req + "-reset": rfc(10 * 365 * 24 * time.Hour),
			tok + "-reset": rfc(time.Minute)}, time.Minute, true},
		{"anthropic, only garbage", map[string]string{tok + "-reset": "soon", req + "-reset": "-5"}, 0, false},
		{"anthropic, retry-after comes first", map[string]string{
			"retry-after": "7", req + "-remaining": "0", req + "-reset": rfc(time.Minute)}, 7 * time.Second, true},
		{"anthropic, a remaining count without its reset", map[string]string{req + "-remaining": "0"}, 0, false},

		// OpenAI: durations, chosen as Anthropic's.
		{"openai, the requests exhausted", map[string]string{
			"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s",
			"x-ratelimit-remaining-tokens": "149000", "x-ratelimit-reset-tokens": "6m0s"}, time.Second, true},
		{"openai, the tokens exhausted", map[string]string{
			"x-ratelimit-remaining-requests": "2", "x-ratelimit-reset-requests": "20ms",
			"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1h2m3.5s"}, time.Hour + 2*time.Minute + 3500*time.Millisecond, true},
		{"openai, no counts: the latest", map[string]string{"x-ratelimit-reset-requests": "20ms", "x-ratelimit-reset-tokens": "6m0s"}, 6 * time.Minute, true},
		{"openai, a malformed duration is ignored", map[string]string{"x-ratelimit-reset-requests": "-1s", "x-ratelimit-reset-tokens": "6 minutes"}, 0, false},
		{"openai, x-ratelimit-reset-ms comes first", map[string]string{"x-ratelimit-reset-ms": "250", "x-ratelimit-reset-tokens": "6m0s"}, 250 * time.Millisecond, true},
		{"openai, a huge duration saturates", map[string]string{"x-ratelimit-reset-tokens": "99999999999999999999h"}, time.Duration(math.MaxInt64), true},

		// Names in any case; among spellings of one name, the lower-case one.
		{"names in any case", map[string]string{"Anthropic-Ratelimit-Tokens-Reset": rfc(time.Minute)}, time.Minute, true},
		{"the lower-case spelling first", map[string]string{"Retry-After": "9", "retry-after": "3", "RETRY-AFTER": "5"}, 3 * time.Second, true},
		{"else the first by byte order", map[string]string{"Retry-After": "9", "RETRY-AFTER": "5"}, 5 * time.Second, true},
	}
	for _, c := range cases {
		m := classify.Message{StopReason: transcript.StopReasonError, Status: 429, ErrorMessage: "rate limited", Headers: c.headers}
		for range 3 { // map order must not matter
			r := classify.Extended.Classify(m, now)
			assert.Equal(t, c.ok, r.HasRetryAfter, c.name)
			assert.Equal(t, c.want, r.RetryAfter, c.name)
		}
	}
}

// Issue 24: the reset times in error text, as the agents show them.
func TestTextResetHints(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		text string
		want time.Duration
		ok   bool
	}{
		// Prose durations.
		{"You've hit your usage limit. Upgrade to Pro or try again in 2 hours 3 minutes.", 2*time.Hour + 3*time.Minute, true},
		{"try again in 45 minutes", 45 * time.Minute, true},
		{"Try again in 1h 2m.", time.Hour + 2*time.Minute, true},
		{"please try again in 30 seconds", 30 * time.Second, true},
		{"Please try again in 644ms.", 644 * ms, true},
		{"Please try again in 1.574s. Visit the rate limits page", 1574 * ms, true},
		{"Please try again in 6m0s.", 6 * time.Minute, true},
		{"or try again in 5 days 22 hours 11\nminutes.", 5*24*time.Hour + 22*time.Hour + 11*time.Minute, true},
		{"try again in 2 hours, 3 minutes and 4 seconds", 2*time.Hour + 3*time.Minute + 4*time.Second, true},
		{"Try again in ~158 min.", 158 * time.Minute, true},
		{"Please retry in 25.465784708s.", 25465784708 * time.Nanosecond, true},
		{"Resets in 9h22m20s", 9*time.Hour + 22*time.Minute + 20*time.Second, true},
		{"Your limit will reset in 1 hour", time.Hour, true},
		{"try again in a few minutes", 0, false},
		{"try again in 5 mangoes", 0, false},
		{"try again in 5", 0, false},
		{"try again later", 0, false},
		{"try again in -5 minutes", 0, false},
		{"try again in 99999999999999999999999 days", time.Duration(math.MaxInt64), true},

		// Google's RetryInfo, however the body is printed.
		{`{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"38s"}]}}`, 38 * time.Second, true},
		{`{'@type': 'type.googleapis.com/google.rpc.RetryInfo', 'retryDelay': '59s'}]}}`, 59 * time.Second, true},
		{`\"@type\": \"type.googleapis.com/google.rpc.RetryInfo\",\n \"retryDelay\": \"1.5s\"\n`, 1500 * ms, true},
		{"429 RESOURCE_EXHAUSTED: Quota exceeded (retryDelay: 30s)", 30 * time.Second, true},
		{`"retryDelay": "soon"`, 0, false},
		{`"retryDelay": "-3s"`, 0, false},

		// A usage limit's body fields.
		{fmt.Sprintf(`{"error":{"type":"usage_limit_reached","resets_at":%d,"resets_in_seconds":3600}}`, now.Add(time.Hour).Unix()), time.Hour, true},
		{fmt.Sprintf(`{"error":{"type":"usage_limit_reached","resets_at":%d}}`, now.Add(2*time.Hour).Unix()), 2 * time.Hour, true},
		{fmt.Sprintf(`"resets_at": %d`, now.Add(20*365*24*time.Hour).Unix()), 0, false},

		// A time of day: the next after now (12:00 UTC), in UTC.
		{"Claude usage limit reached. Your limit will reset at 3pm.", 3 * time.Hour, true},
		{"5-hour limit reached ∙ resets 3:15 PM", 3*time.Hour + 15*time.Minute, true},
		{"Session limit reached · resets 10am", 22 * time.Hour, true},
		{"resets 12pm", 24 * time.Hour, true}, // now is 12pm: the next one
		{"resets 12am", 12 * time.Hour, true},
		{"resets at 15:00", 3 * time.Hour, true},
		{"resets at 12:30", 30 * time.Minute, true},
		// In a named zone: 12:00 UTC is 07:00 in New York in November.
		{"Claude usage limit reached. Your limit will reset at 3pm (America/New_York).", 8 * time.Hour, true},
		{"You've hit your session limit · resets 12:50am (America/Los_Angeles)", 20*time.Hour + 50*time.Minute, true},
		{"Your limit will reset at 1pm (Etc/GMT+5).", 6 * time.Hour, true},
		{"resets 1:40pm (Europe/Paris)", 40 * time.Minute, true},
		{"resets 3pm (Mars/Olympus_Mons)", 0, false},
		{"resets 3pm (Local)", 0, false},
		{"resets 3pm (../../etc/passwd)", 3 * time.Hour, true}, // no zone name: UTC
		{"resets 13pm", 0, false},
		{"resets 0am", 0, false},
		{"resets 24:00", 0, false},
		{"resets 3:60pm", 0, false},
		{"resets 300 tokens", 0, false},
		{"resets 5 times", 0, false},
		{"preset 3pm", 0, false},
		{"You've hit your weekly limit · resets Mon", 0, false},

		// A |epoch suffix.
		{fmt.Sprintf("Claude AI usage limit reached|%d", now.Add(5*time.Hour).Unix()), 5 * time.Hour, true},
		{fmt.Sprintf("Claude AI usage limit reached|%d", now.Add(-time.Hour).Unix()), 0, true},
		{fmt.Sprintf("Claude AI usage limit reached|%d", now.Add(10*365*24*time.Hour).Unix()), 0, false},
		{fmt.Sprintf("a table | %d |", now.Add(time.Hour).Unix()), 0, false},
		{fmt.Sprintf("reached|%d5", now.Add(time.Hour).Unix()), 0, false},

		// Quoted header dumps.
		{`headers: { 'retry-after': '30', 'x-should-retry': 'true' }`, 30 * time.Second, true},
		{`"retry-after-ms": "1500"`, 1500 * ms, true},
		{`'anthropic-ratelimit-requests-remaining': '0', 'anthropic-ratelimit-requests-reset': '` + rfc(40*time.Second) + `', 'anthropic-ratelimit-tokens-reset': '` + rfc(time.Minute) + `'`, 40 * time.Second, true},
		{`x-ratelimit-reset-requests: 2s, x-ratelimit-reset-tokens: 20ms`, 2 * time.Second, true},

		// Precedence: a header form before a body field before prose.
		{`retry-after: 3 "retryDelay": "38s" try again in 1 hour`, 3 * time.Second, true},
		{`"retryDelay": "38s" Please retry in 38.5s.`, 38 * time.Second, true},
		{"try again in 2 minutes; resets at 3pm", 2 * time.Minute, true},
	}
	for _, c := range cases {
		got, ok := classify.RetryAfter(c.text, now)
		assert.Equal(t, c.ok, ok, "%q", c.text)
		assert.Equal(t, c.want, got, "%q", c.text)
	}
}

// A time of day across a daylight-saving change is the wall-clock time of
// that zone, not 24 hours on.
func TestTimeOfDayHintAcrossDST(t *testing.T) {
	// 2026-03-29 01:30 UTC is 03:30 in Berlin, after the clocks went
	// forward; "resets 2:30am" there is the next day's 02:30 CEST.
	at := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)
	d, ok := classify.RetryAfter("resets 2:30am (Europe/Berlin)", at)
	assert.True(t, ok)
	assert.Equal(t, 23*time.Hour, d)
}

// A time of day the clocks skip (the hour a change to summer time leaves
// out) resets when they skip it, not a day later: at 01:30 EST in New York
// on 2026-03-08, "2:30am" is the change at 3:00 EDT, half an hour on. It
// read as the next day's 2:30, 24 hours on, past retry.maxResetWaitMs: the
// turn failed instead of waiting half an hour. So too when the change is
// at midnight (Santiago, 2026-09-06: 00:00 -04 becomes 01:00 -03).
func TestTimeOfDayHintInASkippedHour(t *testing.T) {
	at := time.Date(2026, 3, 8, 6, 30, 0, 0, time.UTC) // 01:30 EST
	d, ok := classify.RetryAfter("usage limit reached, resets at 2:30am (America/New_York)", at)
	assert.True(t, ok)
	assert.Equal(t, 30*time.Minute, d)

	at = time.Date(2026, 9, 6, 3, 50, 0, 0, time.UTC) // 23:50 -04 on the 5th
	d, ok = classify.RetryAfter("usage limit reached, resets at 00:30 (America/Santiago)", at)
	assert.True(t, ok)
	assert.Equal(t, 10*time.Minute, d)

	// After the change, the next 2:30 that exists is the next day's.
	at = time.Date(2026, 3, 8, 7, 30, 0, 0, time.UTC) // 03:30 EDT
	d, ok = classify.RetryAfter("usage limit reached, resets at 2:30am (America/New_York)", at)
	assert.True(t, ok)
	assert.Equal(t, 23*time.Hour, d)
}

// Issue 24: garbage in any hint is ignored or capped, never a panic, never
// negative, whatever the clock says.
func TestHintGarbage(t *testing.T) {
	garbage := []string{
		"retry-after: -5", "retry-after: 1e9", "retry-after: NaN", "retry-after: Inf", "retry-after: 0x10",
		"retry-after: 2026-02-30T00:00:00Z", "retry-after: 9999-12-31T23:59:59Z",
		"anthropic-ratelimit-tokens-reset: 0000-01-01T00:00:00Z", "anthropic-ratelimit-tokens-reset: 2026-11-29T12:00:00+99:00",
		"x-ratelimit-reset-tokens: 1.2.3s", "x-ratelimit-reset-tokens: s", "x-ratelimit-reset-tokens: 5", "x-ratelimit-reset-tokens: " + strings.Repeat("9", 400) + "h",
		"retryDelay: " + strings.Repeat("1", 5000) + "s", "retryDelay: .5s", "retryDelay: 5.s",
		"try again in " + strings.Repeat("1 hour ", 10000), "try again in 1.", "try again in .",
		"resets 99:99", "resets 1:5pm", "resets 3pm (" + strings.Repeat("A", 100) + ")", "resets 3pm (Europe/",
		"|" + strings.Repeat("9", 10), "x|9999999999", "x|0000000000", "x|" + strings.Repeat("9", 30),
		"resets_at: 0", "resets_at: " + strings.Repeat("9", 30), "resets_in_seconds: " + strings.Repeat("9", 30),
	}
	clocks := []time.Time{now, time.Unix(0, 0), {}, time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), time.Unix(-1<<40, 0)}
	for _, text := range garbage {
		for _, at := range clocks {
			d, ok := classify.RetryAfter(text, at)
			assert.GreaterOrEqual(t, d, time.Duration(0), "%.60q at %v", text, at)
			if !ok {
				assert.Zero(t, d, "%.60q at %v", text, at)
			}
			if ok && d > 366*24*time.Hour && d != math.MaxInt64 {
				// A relative number may be large; no absolute time is.
				assert.NotContains(t, text, "reset", "%.60q at %v gives %v", text, at, d)
			}
		}
	}
}

// adversarial are texts that repeat a hint's name with no usable value:
// each occurrence is tried, and must cost no more than its own bytes.
func adversarial(n int) map[string]string {
	return map[string]string{
		"retry-after":  strings.Repeat("retry-after:", n),
		"retryDelay":   strings.Repeat(`"retryDelay":`, n),
		"anthropic":    strings.Repeat("anthropic-ratelimit-tokens-reset:", n),
		"phrases":      strings.Repeat("try again in 1.", n),
		"time of day":  strings.Repeat("resets 3pm (", n),
		"epoch suffix": strings.Repeat("a|123456789", n),
		"resets_at":    strings.Repeat("resets_at:", n),
		"upper case":   strings.Repeat("RETRY-AFTER:", n),
	}
}

// BenchmarkRetryAfterRepeatedNames: the hint readers on texts of 1.5 MB
// that repeat a name; the time grows linearly with the text.
func BenchmarkRetryAfterRepeatedNames(b *testing.B) {
	for name, text := range adversarial(1 << 17) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				classify.RetryAfter(text, now)
			}
		})
	}
}

// Issue 27 item 7: a workflow replaying a classification must read the
// same hint from the same headers, so two spellings of one header name
// give the same delay on every run, whatever order the map ranges in.
// Each case is classified 100 times (Go's map order changes between
// ranges), by Classify and by Explain.
func TestHeaderSpellingsAreDeterministic(t *testing.T) {
	cases := []struct {
		headers map[string]string
		want    time.Duration
	}{
		{map[string]string{"Retry-After": "9", "RETRY-AFTER": "5"}, 5 * time.Second},
		{map[string]string{"Retry-After": "9", "retry-After": "2"}, 9 * time.Second},
		{map[string]string{"Retry-After-Ms": "900", "retry-after-MS": "300", "RETRY-AFTER-MS": "600"}, 600 * time.Millisecond},
		{map[string]string{"X-Ratelimit-Reset-Requests": "2s", "x-RateLimit-reset-requests": "7s"}, 2 * time.Second},
	}
	for _, c := range cases {
		m := classify.Message{StopReason: transcript.StopReasonError, Status: 429, ErrorMessage: "rate limited", Headers: c.headers}
		for i := range 100 {
			r := classify.Extended.Classify(m, now)
			if !r.HasRetryAfter || r.RetryAfter != c.want {
				t.Fatalf("%v, classification %d: hint %v (%v), want %v", c.headers, i+1, r.RetryAfter, r.HasRetryAfter, c.want)
			}
			if e, _ := classify.Extended.Explain(m, now); e.RetryAfter != c.want {
				t.Fatalf("%v, explanation %d: hint %v, want %v", c.headers, i+1, e.RetryAfter, c.want)
			}
		}
	}
}
