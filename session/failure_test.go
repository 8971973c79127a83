package session_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

func TestFailedMessage(t *testing.T) {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	for _, c := range []struct {
		name    string
		status  int
		header  http.Header
		body    string
		err     error
		message string
		typ     string
		class   classify.Class
	}{
		{"anthropic overloaded", 529, h("Request-Id", "req_1"), `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, nil,
			"529 overloaded_error: Overloaded", "overloaded_error", classify.Retryable},
		{"anthropic prompt too long", 400, nil, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}`, nil,
			"400 invalid_request_error: prompt is too long: 213462 tokens > 200000 maximum", "invalid_request_error", classify.Overflow},
		{"openai quota in a 429", 429, nil, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, nil,
			"429 insufficient_quota: You exceeded your current quota", "insufficient_quota", classify.UsageLimit},
		{"openai rate limit with hints", 429, h("Retry-After", "7", "X-Ratelimit-Reset-Requests", "1s"), `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, nil,
			"429 rate_limit_exceeded: Rate limit reached", "rate_limit_exceeded", classify.Retryable},
		{"a body of no known shape", 502, nil, "<html>Bad Gateway</html>", nil, "502 <html>Bad Gateway</html>", "", classify.Retryable},
		{"no response", 0, nil, "", io.ErrUnexpectedEOF, "unexpected EOF", "", classify.Retryable},
		{"bedrock throttling", 400, h("X-Amzn-Errortype", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"), `{"message":"Too many requests, please wait before trying again."}`, nil,
			"400 ThrottlingException: Too many requests, please wait before trying again.", "ThrottlingException", classify.Retryable},
		{"a status alone", 503, nil, "", nil, "503 Service Unavailable", "", classify.Retryable},
		// Issue 14 item 3: nested bodies are unwrapped.
		{"openrouter relaying an error object", 402, nil, `{"error":{"error":{"message":"More credits are required to run this request.","code":402},"code":402}}`, nil,
			"402 More credits are required to run this request.", "", classify.UsageLimit},
		{"a gateway's status as a string", 0, nil, `{"error":{"message":"Rate limit reached","type":null,"code":"429"}}`, nil,
			"429 Rate limit reached", "", classify.Retryable},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := session.FailedMessage(c.status, c.header, []byte(c.body), c.err)
			assert.Equal(t, c.message, m.ErrorMessage)
			assert.Equal(t, c.typ, m.ErrorType)
			assert.Equal(t, transcript.RoleAssistant, m.Role)
			assert.True(t, m.IsError())
			for name := range c.header {
				assert.Contains(t, m.Headers, strings.ToLower(name))
			}
			got := classify.Extended.Classify(classify.Message{StopReason: m.StopReason, ErrorMessage: m.ErrorMessage,
				Status: m.HTTPStatus, ErrorType: m.ErrorType, Headers: m.Headers, Err: m.Err}, time.Now())
			assert.Equal(t, c.class, got.Class)
		})
	}
	m := session.FailedMessage(429, http.Header{"Retry-After": {"7"}, "Authorization": {"Bearer secret"}}, nil, nil)
	assert.NotContains(t, m.Headers, "authorization", "no secret is kept")
	assert.Equal(t, "7", m.Headers["retry-after"])
	assert.True(t, errors.Is(session.FailedMessage(0, nil, nil, io.ErrUnexpectedEOF).Err, io.ErrUnexpectedEOF))
}

// issue item 4: a provider's spend or quota code reaches the classifier as
// the message's error type, which it reads before the text: with the text
// removed, each is still a usage limit (the usage-limit branch under the
// seed rules), not the fatal or retryable error its status alone says.
func TestFailedMessageSpendCodesAreTyped(t *testing.T) {
	for _, c := range []struct {
		name, body, typ string
		status          int
	}{
		{"openai insufficient_quota", `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, "insufficient_quota", 429},
		{"openai billing hard limit", `{"error":{"message":"Billing hard limit has been reached","type":"invalid_request_error","param":null,"code":"billing_hard_limit_reached"}}`, "billing_hard_limit_reached", 400},
		{"anthropic spend limit", `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your organization's monthly spend limit.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_1"}`, "enforced_spend_limit_reached", 429},
		{"anthropic billing error", `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low to access the Anthropic API."}}`, "billing_error", 402},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := session.FailedMessage(c.status, nil, []byte(c.body), nil)
			assert.Equal(t, c.typ, m.ErrorType)
			assert.Contains(t, m.ErrorMessage, c.typ+": ", "the message names the code")
			typed := classify.Message{StopReason: m.StopReason, Status: m.HTTPStatus, ErrorType: m.ErrorType}
			assert.Equal(t, classify.UsageLimit, classify.Extended.Classify(typed, time.Now()).Class)
			seed := classify.Seed.Classify(typed, time.Now())
			assert.True(t, seed.UsageLimit, "the seed rules take the usage-limit branch")
		})
	}
}

// Issue 24: a Gemini body in a JSON array is read as the body it holds, and
// its RetryInfo's delay ends the message, kept whole however long the
// provider's message is, so that the classifier reads it as the hint.
func TestFailedMessageGeminiRetryInfo(t *testing.T) {
	for _, msg := range []string{"Resource has been exhausted (e.g. check quota).", strings.Repeat("* Quota exceeded for metric: generate_content_free_tier_requests\\n", 200)} {
		body := `[{"error":{"code":429,"message":"` + msg + `","status":"RESOURCE_EXHAUSTED",` +
			`"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26.5s"}]}}]`
		m := session.FailedMessage(429, nil, []byte(body), nil)
		assert.Equal(t, "RESOURCE_EXHAUSTED", m.ErrorType)
		assert.True(t, strings.HasPrefix(m.ErrorMessage, "429 RESOURCE_EXHAUSTED: "), m.ErrorMessage)
		assert.True(t, strings.HasSuffix(m.ErrorMessage, " (retryDelay: 26.5s)"), m.ErrorMessage)
		assert.LessOrEqual(t, len(m.ErrorMessage), maxErrorMessage)
		got := classify.Extended.Classify(classify.Message{StopReason: m.StopReason, ErrorMessage: m.ErrorMessage,
			Status: m.HTTPStatus, ErrorType: m.ErrorType, Headers: m.Headers}, time.Now())
		assert.True(t, got.HasRetryAfter)
		assert.Equal(t, 26500*time.Millisecond, got.RetryAfter)
	}
}
