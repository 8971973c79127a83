package classify_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transcript"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func errMsg(text string) classify.Message {
	return classify.Message{StopReason: transcript.StopReasonError, ErrorMessage: text}
}

func classOf(r classify.Rules, text string) classify.Class {
	return r.Classify(errMsg(text), now).Class
}

// TestSeedPatterns pins every pattern of the seed set (§2.1), each with a
// text it matches and one it does not, and the set's known flaws.
func TestSeedPatterns(t *testing.T) {
	cases := []struct {
		text      string
		retryable bool
	}{
		{"Overloaded", true},
		{"overload", false},
		{"Rate limit exceeded", true},
		{"rate_limit_error", true},
		{"ratelimit", true},
		{"rate  limit", false}, // .? is at most one character
		{"usage limit reached", true},
		{"usage__limit", false},
		{"Too Many Requests", true},
		{"too many request", false},
		{"HTTP 429", true},
		{"status 500", true},
		{"502", true},
		{"503", true},
		{"504", true},
		{"1500 tokens", true}, // flaw: bare digits anywhere
		{"id 4290", true},     // flaw
		{"529 Overloaded", true},
		{"529", false}, // flaw: a bare 529 is not in the set
		{"501 Not Implemented", false},
		{"Service Unavailable", true},
		{"service_unavailable", true},
		{"serviceunavailable", true},
		{"Internal server error", true},
		{"server_error", false}, // flaw: a literal space
		{"internal error", true},
		{"internal_error", false}, // flaw: a literal space
		{"Connection error.", true},
		{"connection_error", true},
		{"connection refused", false}, // flaw
		{"ECONNRESET", false},         // flaw
		{"socket hang up", false},     // flaw
		{"TypeError: fetch failed", true},
		{"fetch  failed", false},
		{"Server requested 90s retry delay (max: 60s).", true},
		{"retry-delay", false},
		{"invalid api key", false},
		{"", false},
	}
	for _, c := range cases {
		want := classify.Fatal
		if c.retryable {
			want = classify.Retryable
		}
		assert.Equal(t, want, classOf(classify.Seed, c.text), "%q", c.text)
	}
}

// TestSeedJavaScriptSemantics pins the reference's regex dialect where Go's
// differs: ASCII-only case folding, "." excluding \r and the line
// separators, and ".?" spanning one UTF-16 code unit.
func TestSeedJavaScriptSemantics(t *testing.T) {
	cases := []struct {
		text      string
		retryable bool
	}{
		{"RATE LIMIT", true},
		{"rate\rlimit", false},         // JS "." does not match \r
		{"rate\u2028limit", false},     // nor a line separator
		{"rate\u00e9limit", true},      // one BMP character
		{"rate\U0001F600limit", false}, // two code units: .? cannot span it
		{"overloaded\nlater", true},
		{"\u017Fervice unavailable", false}, // long s does not fold to s
		{"too many requests", true},
		{"too many reque\u017Fts", false},
	}
	for _, c := range cases {
		want := classify.Fatal
		if c.retryable {
			want = classify.Retryable
		}
		assert.Equal(t, want, classOf(classify.Seed, c.text), "%q", c.text)
	}
	// The Kelvin sign is not "k" in the reference's dialect.
	assert.Equal(t, classify.Fatal, classOf(classify.Extended, "ta\u212Aen"), "kelvin")
}

func TestUsageFlag(t *testing.T) {
	for _, text := range []string{"Claude AI usage limit reached|1749924000", "usage_limit_reached", "You've hit your usage limit."} {
		r := classify.Seed.Classify(errMsg(text), now)
		assert.Equal(t, classify.Retryable, r.Class, text)
		assert.True(t, r.UsageLimit, text)
		r = classify.Extended.Classify(errMsg(text), now)
		assert.Equal(t, classify.UsageLimit, r.Class, text)
		assert.True(t, r.UsageLimit, text)
	}
	// §2.2 applies to retryable errors only: "limit_reached" alone is not
	// in the seed's retry set.
	r := classify.Seed.Classify(errMsg("limit_reached"), now)
	assert.Equal(t, classify.Fatal, r.Class)
	assert.False(t, r.UsageLimit)
	r = classify.Seed.Classify(errMsg("rate_limit_reached"), now)
	assert.Equal(t, classify.Retryable, r.Class)
	assert.True(t, r.UsageLimit)
	r = classify.Seed.Classify(errMsg("503 Service Unavailable"), now)
	assert.False(t, r.UsageLimit)
}

func TestOverflowPatterns(t *testing.T) {
	overflows := []string{
		"prompt is too long: 213462 tokens > 200000 maximum",
		"Input is too long for requested model.",
		"Your input exceeds the context window of this model.",
		"The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)",
		"This model's maximum prompt length is 131072 but the request contains 537812 tokens",
		"Please reduce the length of the messages or completion",
		"This endpoint's maximum context length is 131072 tokens",
		"prompt token count of 150000 exceeds the limit of 128000",
		"the request exceeds the available context size",
		"requested tokens (9000) exceed context window of 8192",
		"context length exceeded",
		"context window overflow",
		"context size too small",
		"input is too large for the model's context",
		"requested token count exceeds n_ctx",
		"requested tokens greater than the model's context",
		"tokens to keep from the initial prompt is greater than the context length",
		"context window exceeds limit (2013)",
		"Exceeded model token limit: 262144",
		"Prompt contains 40000 tokens and is too large for model with 32768 maximum context length",
		"model_context_window_exceeded",
		"context_length_exceeded",
		"Too many tokens in request",
		"token limit exceeded",
		`413 {"error":{"type":"request_too_large"}}`,
		"400 status code (no body)",
		"413 (no body)",
		"400(no body)",
	}
	for _, text := range overflows {
		assert.True(t, classify.IsOverflow(errMsg(text)), "%q", text)
		assert.Equal(t, classify.Overflow, classOf(classify.Seed, text), "%q", text)
		assert.Equal(t, classify.Overflow, classOf(classify.Extended, text), "%q", text)
	}
	notOverflows := []string{
		"Throttling error: Too many tokens, please wait before trying again.",
		"Service unavailable: context length exceeded",
		"ThrottlingException: Too many tokens, please wait",
		"429 Too many tokens, please wait before trying again.",
		"rate limit: too many tokens",
		"too many requests: token limit exceeded",
		"error: 400 status code (no body)", // the bodyless form is anchored
		"maximum context length is large",
		"",
	}
	for _, text := range notOverflows {
		assert.False(t, classify.IsOverflow(errMsg(text)), "%q", text)
		assert.NotEqual(t, classify.Overflow, classOf(classify.Seed, text), "%q", text)
	}
	// An overflow is never retryable, whatever else it says.
	assert.Equal(t, classify.Overflow, classOf(classify.Seed, "503 overloaded: prompt is too long"))
	// Only an error message is an overflow by its text.
	assert.False(t, classify.IsOverflow(classify.Message{StopReason: transcript.StopReasonStop, ErrorMessage: "prompt is too long"}))
}

func TestSilentAndTruncatedOverflow(t *testing.T) {
	u := func(in, out, cache int) transcript.Usage {
		return transcript.Usage{Input: in, Output: out, CacheRead: cache}
	}
	cases := []struct {
		name string
		m    classify.Message
		want classify.Class
	}{
		{"stop within the window", classify.Message{StopReason: "stop", Usage: u(150000, 10, 50000), ContextWindow: 200000}, classify.None},
		{"stop over the window", classify.Message{StopReason: "stop", Usage: u(150000, 10, 50001), ContextWindow: 200000}, classify.Overflow},
		{"stop, window unknown", classify.Message{StopReason: "stop", Usage: u(900000, 10, 0)}, classify.None},
		{"length at 99%", classify.Message{StopReason: "length", Usage: u(197000, 0, 1000), ContextWindow: 200000}, classify.Overflow},
		{"length below 99%", classify.Message{StopReason: "length", Usage: u(197999, 0, 0), ContextWindow: 200000}, classify.None},
		{"length with output", classify.Message{StopReason: "length", Usage: u(199000, 5, 0), ContextWindow: 200000}, classify.None},
		{"toolUse over the window", classify.Message{StopReason: "toolUse", Usage: u(300000, 0, 0), ContextWindow: 200000}, classify.None},
		{"aborted", classify.Message{StopReason: "aborted", ErrorMessage: "prompt is too long", ContextWindow: 200000}, classify.None},
	}
	for _, c := range cases {
		for _, r := range []classify.Rules{classify.Seed, classify.Extended} {
			assert.Equal(t, c.want, r.Classify(c.m, now).Class, "%s (%s)", c.name, r)
		}
	}
}

func TestExtendedFixesSeedFlaws(t *testing.T) {
	cases := []struct {
		text string
		want classify.Class
	}{
		{"1500 tokens used", classify.Fatal},
		{"HTTP 529", classify.Retryable},
		{"529 Overloaded", classify.Retryable},
		{"server_error", classify.Retryable},
		{"internal_error", classify.Retryable},
		{"connect ECONNREFUSED 127.0.0.1:443", classify.Retryable},
		{"read ECONNRESET", classify.Retryable},
		{"socket hang up", classify.Retryable},
		{"connection refused", classify.Retryable},
		{"connection reset by peer", classify.Retryable},
		{"SocketError: other side closed", classify.Retryable},
		{"upstream connect error or disconnect/reset before headers", classify.Retryable},
		{"TypeError: terminated", classify.Retryable},
		{"request timed out", classify.Retryable},
		{"ETIMEDOUT", classify.Retryable},
		{"network error", classify.Retryable},
		{"stream disconnected before completion", classify.Retryable},
		{"502 Bad Gateway", classify.Retryable},
		{"Gateway Timeout", classify.Retryable},
		{"insufficient_quota", classify.UsageLimit},
		{"Your credit balance is too low to access the Anthropic API.", classify.UsageLimit},
		{"Quota exceeded for quota metric 'Requests per day per user'", classify.UsageLimit},
		{"Quota exceeded for quota metric 'Requests per minute'", classify.Fatal},
		{"limit resets_at 1749924000", classify.UsageLimit},
		{"you have hit your usage limit", classify.UsageLimit},
		{"Invalid API key", classify.Fatal},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, classOf(classify.Extended, c.text), "%q", c.text)
	}
}

func TestTypedFieldsDecideFirst(t *testing.T) {
	type tc struct {
		name string
		m    classify.Message
		want classify.Class
	}
	msg := func(status int, typ, text string) classify.Message {
		m := errMsg(text)
		m.Status, m.ErrorType = status, typ
		return m
	}
	cases := []tc{
		{"529 with an empty body", msg(529, "", ""), classify.Retryable},
		{"503 with an unknown body", msg(503, "", "something odd"), classify.Retryable},
		{"408", msg(408, "", ""), classify.Retryable},
		{"409", msg(409, "", ""), classify.Retryable},
		{"429 plain", msg(429, "", ""), classify.Retryable},
		{"insufficient_quota on 429", msg(429, "insufficient_quota", "You exceeded your current quota"), classify.UsageLimit},
		{"429 whose text reads like an overflow", msg(429, "", "Too many tokens"), classify.Retryable},
		{"400 whose text says retry", msg(400, "", "overloaded"), classify.Fatal},
		{"401", msg(401, "", "503 in the text"), classify.Fatal},
		{"403", msg(403, "", ""), classify.Fatal},
		{"404", msg(404, "", "server error"), classify.Fatal},
		{"400 overflow body", msg(400, "", "prompt is too long"), classify.Overflow},
		{"400 usage-limit body", msg(400, "", "Your credit balance is too low"), classify.UsageLimit},
		{"overloaded_error type", msg(0, "overloaded_error", ""), classify.Retryable},
		{"rate_limit_error type", msg(0, "rate_limit_error", "whatever"), classify.Retryable},
		{"invalid_request_error type", msg(0, "invalid_request_error", "503"), classify.Fatal},
		{"request_too_large type", msg(413, "request_too_large", ""), classify.Overflow},
		{"type decides before status", msg(429, "insufficient_quota", ""), classify.UsageLimit},
		{"unknown status falls to text", msg(418, "", "overloaded"), classify.Retryable},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, classify.Extended.Classify(c.m, now).Class, c.name)
	}
	// Under seed a usage limit is retryable with the flag.
	r := classify.Seed.Classify(msg(429, "insufficient_quota", ""), now)
	assert.Equal(t, classify.Retryable, r.Class)
	assert.True(t, r.UsageLimit)

	goErrs := []error{
		io.ErrUnexpectedEOF,
		context.DeadlineExceeded,
		fmt.Errorf("read: %w", syscall.ECONNRESET),
		&net.OpError{Op: "dial", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}},
		&net.DNSError{Err: "timeout", IsTimeout: true},
	}
	for _, err := range goErrs {
		m := classify.Message{StopReason: transcript.StopReasonError, Err: err}
		assert.Equal(t, classify.Retryable, classify.Extended.Classify(m, now).Class, "%v", err)
		assert.Equal(t, classify.Retryable, classify.Seed.Classify(m, now).Class, "%v", err)
	}
	m := classify.Message{StopReason: transcript.StopReasonError, Err: errors.New("boom")}
	assert.Equal(t, classify.Fatal, classify.Extended.Classify(m, now).Class)
	m = classify.Message{StopReason: transcript.StopReasonError, Err: errors.New("fetch failed")}
	assert.Equal(t, classify.Retryable, classify.Seed.Classify(m, now).Class, "a Go error's text is read when there is no message")
}

func TestRetryAfter(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		text string
		want time.Duration
		ok   bool
	}{
		{"retry-after-ms: 1500", 1500 * ms, true},
		{"Retry-After-Ms=250", 250 * ms, true},
		{"retry-after: 30", 30 * time.Second, true},
		{"retry-after: 1.5", 1500 * ms, true},
		{"retry-after=2, foo", 2 * time.Second, true},
		{"Retry-After: 2026-11-29T12:00:10Z", 10 * time.Second, true},
		{"Retry-After: 2026-11-29T11:00:00Z", 0, true}, // in the past: 0
		{"retry-after: soon", 0, false},
		{"x-ratelimit-reset-ms: 2000", 2 * time.Second, true},
		{"x-ratelimit-reset-ms: 1000000000000", 1000000000000 * ms, true}, // 10^12 is a duration
		{fmt.Sprintf("x-ratelimit-reset-ms: %d", now.Add(5*time.Second).UnixMilli()), 5 * time.Second, true},
		{"x-ratelimit-reset: 7", 7 * time.Second, true},
		{"x-ratelimit-reset: 1000000000", 1000000000 * time.Second, true}, // 10^9 is a duration
		{fmt.Sprintf("x-ratelimit-reset: %d", now.Add(time.Minute).Unix()), time.Minute, true},
		{fmt.Sprintf("x-ratelimit-reset: %d", now.Add(-time.Minute).Unix()), 0, true},
		// Precedence: rule 1, then 2, 3, 4, wherever they stand in the text.
		{"x-ratelimit-reset: 9 retry-after: 3 retry-after-ms: 100", 100 * ms, true},
		{"x-ratelimit-reset: 9 retry-after: 3", 3 * time.Second, true},
		{"x-ratelimit-reset: 9 x-ratelimit-reset-ms: 40", 40 * ms, true},
		{"retry-after-ms: x retry-after-ms: 5", 5 * ms, true},
		{"retry-after-ms: 99999999999999999999999", time.Duration(math.MaxInt64), true},
		{"retry-after : 4", 4 * time.Second, true},
		{"retry-after\u00a0:\u00a04", 4 * time.Second, true},
		{"retry after 4", 0, false},
		{"no hint here", 0, false},
		{"", 0, false},
	}
	for _, c := range cases {
		got, ok := classify.RetryAfter(c.text, now)
		assert.Equal(t, c.ok, ok, "%q", c.text)
		assert.Equal(t, c.want, got, "%q", c.text)
		assert.GreaterOrEqual(t, got, time.Duration(0))
	}
}

func TestHintsInResult(t *testing.T) {
	m := errMsg("429 rate limit; retry-after: 12")
	r := classify.Seed.Classify(m, now)
	assert.True(t, r.HasRetryAfter)
	assert.Equal(t, 12*time.Second, r.RetryAfter)

	// Headers come before text, and an HTTP date parses whole there.
	m.Headers = map[string]string{"Retry-After": "Sun, 29 Nov 2026 12:01:00 GMT"}
	r = classify.Seed.Classify(m, now)
	assert.Equal(t, time.Minute, r.RetryAfter)
	m.Headers = map[string]string{"RETRY-AFTER-MS": " 20 ", "retry-after": "9"}
	r = classify.Seed.Classify(m, now)
	assert.Equal(t, 20*time.Millisecond, r.RetryAfter)

	// A fatal error carries no hint.
	r = classify.Seed.Classify(errMsg("invalid key; retry-after: 5"), now)
	assert.False(t, r.HasRetryAfter)
}

func TestRulesNames(t *testing.T) {
	for _, r := range []classify.Rules{classify.Seed, classify.Extended} {
		back, err := classify.ParseRules(r.String())
		assert.NoError(t, err)
		assert.Equal(t, r, back)
	}
	_, err := classify.ParseRules("strict")
	assert.ErrorContains(t, err, `"strict"`)
	var r classify.Rules
	assert.Error(t, r.UnmarshalText([]byte("x")))
	_, err = classify.Rules(7).MarshalText()
	assert.Error(t, err)
}

func TestClassifyDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	msgs := []classify.Message{
		errMsg("503 Service Unavailable; retry-after: 3"),
		errMsg("prompt is too long"),
		errMsg("You exceeded your current quota"),
		{StopReason: transcript.StopReasonStop, Usage: transcript.Usage{Input: 5}, ContextWindow: 10},
	}
	for _, r := range []classify.Rules{classify.Seed, classify.Extended} {
		for _, m := range msgs {
			allocs := testing.AllocsPerRun(20, func() { r.Classify(m, now) })
			assert.Zero(t, allocs, "%s %q", r, m.ErrorMessage)
		}
	}
}

// issue item 24: the silent and truncated overflow checks are exact for any
// usage numbers: huge ones do not wrap around, and a negative count counts
// as 0.
func TestOverflowChecksDoNotWrap(t *testing.T) {
	const maxInt = math.MaxInt
	u := func(in, out, cache int) transcript.Usage {
		return transcript.Usage{Input: in, Output: out, CacheRead: cache}
	}
	cases := []struct {
		name string
		m    classify.Message
		want bool
	}{
		{"length, input 10^17", classify.Message{StopReason: "length", Usage: u(1e17, 0, 0), ContextWindow: 200000}, true},
		{"stop, input 10^17", classify.Message{StopReason: "stop", Usage: u(1e17, 0, 0), ContextWindow: 200000}, true},
		{"stop, input + cacheRead of 2^62 each", classify.Message{StopReason: "stop", Usage: u(1<<62, 0, 1<<62), ContextWindow: 200000}, true},
		{"length, input + cacheRead of 2^62 each", classify.Message{StopReason: "length", Usage: u(1<<62, 0, 1<<62), ContextWindow: 200000}, true},
		{"stop, both at the int limit", classify.Message{StopReason: "stop", Usage: u(maxInt, 0, maxInt), ContextWindow: maxInt}, true},
		{"stop, one over the largest window", classify.Message{StopReason: "stop", Usage: u(maxInt, 0, 1), ContextWindow: maxInt}, true},
		{"stop, at the largest window", classify.Message{StopReason: "stop", Usage: u(maxInt-1, 0, 1), ContextWindow: maxInt}, false},
		{"length, 99% of the largest window", classify.Message{StopReason: "length", Usage: u(maxInt-maxInt/100-5, 0, 5), ContextWindow: maxInt}, true},
		{"length, just below 99% of the largest window", classify.Message{StopReason: "length", Usage: u(maxInt-maxInt/100-5, 0, 4), ContextWindow: maxInt}, false},
		{"length, 99% of 150 is 148.5", classify.Message{StopReason: "length", Usage: u(149, 0, 0), ContextWindow: 150}, true},
		{"length, 148 < 148.5", classify.Message{StopReason: "length", Usage: u(148, 0, 0), ContextWindow: 150}, false},
		{"length, window 1", classify.Message{StopReason: "length", Usage: u(1, 0, 0), ContextWindow: 1}, true},
		{"length, window 1, nothing read", classify.Message{StopReason: "length", Usage: u(0, 0, 0), ContextWindow: 1}, false},
		{"a negative cacheRead counts as 0", classify.Message{StopReason: "stop", Usage: u(300000, 0, -200000), ContextWindow: 200000}, true},
		{"a negative input counts as 0", classify.Message{StopReason: "stop", Usage: u(math.MinInt, 0, 150000), ContextWindow: 200000}, false},
		{"both at the negative limit", classify.Message{StopReason: "stop", Usage: u(math.MinInt, 0, math.MinInt), ContextWindow: 200000}, false},
		{"both at the negative limit, length", classify.Message{StopReason: "length", Usage: u(math.MinInt, 0, math.MinInt), ContextWindow: 1}, false},
		{"a negative output is no output", classify.Message{StopReason: "length", Usage: u(199000, -1, 0), ContextWindow: 200000}, true},
		{"a negative window is unknown", classify.Message{StopReason: "stop", Usage: u(maxInt, 0, maxInt), ContextWindow: math.MinInt}, false},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, classify.IsOverflow(c.m), c.name)
		want := classify.None
		if c.want {
			want = classify.Overflow
		}
		for _, r := range []classify.Rules{classify.Seed, classify.Extended} {
			assert.Equal(t, want, r.Classify(c.m, now).Class, "%s (%s)", c.name, r)
		}
	}
}

// Issue 14 item 2: an error that reads like a transient one but that no
// retry fixes is fatal under the extended rules, even with a transient
// status; a usage limit still comes first. The seed rules are the
// reference's and know nothing of it.
func TestExtendedFatalBeatsTransient(t *testing.T) {
	tooLarge := "Request too large for gpt-4o in organization org-1 on tokens per min (TPM): Limit 30000, Requested 45000."
	toolIDs := "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'."
	overBudget := "Rate limit reached for model m on tokens per minute (TPM): Limit 6000, Used 0, Requested ~9000."
	for _, c := range []struct {
		name      string
		m         classify.Message
		seed, ext classify.Class
	}{
		{"too large, as text (the seed sees 500 in 45000)", errMsg(tooLarge), classify.Retryable, classify.Fatal},
		{"too large in a 429", classify.Message{StopReason: transcript.StopReasonError, Status: 429, ErrorMessage: tooLarge}, classify.Retryable, classify.Fatal},
		{"tool ids after a 500", classify.Message{StopReason: transcript.StopReasonError, ErrorMessage: "500 internal error: " + toolIDs}, classify.Retryable, classify.Fatal},
		{"tool ids with a transient type", classify.Message{StopReason: transcript.StopReasonError, ErrorType: "api_error", ErrorMessage: toolIDs}, classify.Retryable, classify.Fatal},
		{"over the budget in a 429", classify.Message{StopReason: transcript.StopReasonError, Status: 429, ErrorMessage: overBudget}, classify.Retryable, classify.Fatal},
		{"within the budget", errMsg("Rate limit reached on tokens per min (TPM): Limit 30000, Used 22999, Requested 12528."), classify.Retryable, classify.Retryable},
		{"a usage limit comes first", classify.Message{StopReason: transcript.StopReasonError, Status: 403, ErrorMessage: "Model access is denied: insufficient balance"}, classify.Fatal, classify.UsageLimit},
	} {
		assert.Equal(t, c.seed, classify.Seed.Classify(c.m, now).Class, "seed: %s", c.name)
		assert.Equal(t, c.ext, classify.Extended.Classify(c.m, now).Class, "extended: %s", c.name)
	}
}
