package classify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/classify"
)

func TestParseBody(t *testing.T) {
	for _, c := range []struct {
		name string
		body string
		want classify.ProviderError
		ok   bool
	}{
		{"anthropic", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`,
			classify.ProviderError{Type: "overloaded_error", Message: "Overloaded"}, true},
		{"openai, the code is the precise name", `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			classify.ProviderError{Type: "insufficient_quota", Message: "You exceeded your current quota"}, true},
		{"openai, context length", `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			classify.ProviderError{Type: "context_length_exceeded", Message: "This model's maximum context length is 128000 tokens."}, true},
		{"openai, null code", `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`,
			classify.ProviderError{Type: "server_error", Message: "boom"}, true},
		{"google", `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`,
			classify.ProviderError{Status: 429, Type: "RESOURCE_EXHAUSTED", Message: "Resource has been exhausted (e.g. check quota)."}, true},
		{"google relaying a JSON body in its message", `{"error":{"code":400,"message":"{\n  \"error\": {\n    \"code\": 400,\n    \"message\": \"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).\",\n    \"status\": \"INVALID_ARGUMENT\"\n  }\n}\n","status":"Bad Request"}}`,
			classify.ProviderError{Status: 400, Type: "INVALID_ARGUMENT", Message: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."}, true},
		{"openrouter with the upstream body", `{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Number of request tokens has exceeded your per-minute rate limit\"}}","provider_name":"Anthropic"}}}`,
			classify.ProviderError{Status: 429, Type: "rate_limit_error", Message: "Number of request tokens has exceeded your per-minute rate limit"}, true},
		{"openai responses, response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"context_length_exceeded","message":"Your input exceeds the context window of this model."}}}`,
			classify.ProviderError{Type: "context_length_exceeded", Message: "Your input exceeds the context window of this model."}, true},
		{"a gateway's code as a string", `{"error":{"message":"litellm.RateLimitError: Rate limit reached","type":null,"param":null,"code":"429"}}`,
			classify.ProviderError{Status: 429, Message: "litellm.RateLimitError: Rate limit reached"}, true},
		{"a numeric code outside HTTP is no status", `{"error":{"code":"1113","message":"Insufficient balance or no resource package. Please recharge."}}`,
			classify.ProviderError{Type: "1113", Message: "Insufficient balance or no resource package. Please recharge."}, true},
		{"google status without a code", `{"error":{"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}`,
			classify.ProviderError{Type: "RESOURCE_EXHAUSTED", Message: "Resource exhausted"}, true},
		{"an error object inside an error object", `{"error":{"error":{"message":"More credits are required to run this request.","code":402},"code":402}}`,
			classify.ProviderError{Status: 402, Message: "More credits are required to run this request."}, true},
		{"openrouter with an upstream's raw text", `{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"maximum context length exceeded","provider_name":"Together"}}}`,
			classify.ProviderError{Status: 400, Message: "Provider returned error: maximum context length exceeded"}, true},
		{"aws __type", `{"__type":"com.amazon.coral.service#ThrottlingException","Message":"Rate exceeded"}`,
			classify.ProviderError{Type: "ThrottlingException", Message: "Rate exceeded"}, true},
		{"bedrock", `{"message":"Too many requests, please wait before trying again."}`,
			classify.ProviderError{Message: "Too many requests, please wait before trying again."}, true},
		{"a bare error string", `{"error":"model not found"}`, classify.ProviderError{Message: "model not found"}, true},
		{"not an error body", `{"stopReason":"error"}`, classify.ProviderError{}, false},
		{"an error object that says nothing", `{"error":{"param":null}}`, classify.ProviderError{}, false},
		{"a message of the wrong type", `{"error":{"message":["a","b"]}}`, classify.ProviderError{}, false},
		{"an array", `[1,2]`, classify.ProviderError{}, false},
		// Issue 24: Gemini wraps its body in an array, and says when to
		// retry in a RetryInfo among the error's details.
		{"gemini, a body in an array", `[{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}]`,
			classify.ProviderError{Status: 503, Type: "UNAVAILABLE", Message: "The model is overloaded."}, true},
		{"an array: the first element that is a body", `[1,{"foo":2},{"error":{"message":"second"}}]`, classify.ProviderError{Message: "second"}, true},
		{"an empty array", `[]`, classify.ProviderError{}, false},
		{"an array of no body", `[{"stopReason":"error"}]`, classify.ProviderError{}, false},
		{"google's RetryInfo", `{"error":{"code":429,"message":"You exceeded your current quota. Please retry in 58.934310785s.","status":"RESOURCE_EXHAUSTED","details":[` +
			`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"58s"}]}}`,
			classify.ProviderError{Status: 429, Type: "RESOURCE_EXHAUSTED", Message: "You exceeded your current quota. Please retry in 58.934310785s.", RetryDelay: "58s"}, true},
		{"google's RetryInfo in an array, in a message", `{"error":{"code":429,"message":"[{\"error\":{\"code\":429,\"message\":\"Resource exhausted\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"1.5s\"}]}}]","status":"Too Many Requests"}}`,
			classify.ProviderError{Status: 429, Type: "Too Many Requests", Message: "Resource exhausted", RetryDelay: "1.5s"}, true},
		{"a retryDelay that is no duration is left out", `{"error":{"message":"x","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"-5s"}]}}`,
			classify.ProviderError{Message: "x"}, true},
		{"a retryDelay of another type is left out", `{"error":{"message":"x","details":[{"@type":"type.googleapis.com/google.rpc.Help","retryDelay":"5s"}]}}`,
			classify.ProviderError{Message: "x"}, true},
		{"an endless retryDelay is left out", `{"error":{"message":"x","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + strings.Repeat("9", 100) + `s"}]}}`,
			classify.ProviderError{Message: "x"}, true},
		{"details of the wrong shape", `{"error":{"message":"x","details":{"retryDelay":"5s"}}}`, classify.ProviderError{Message: "x"}, true},
		{"text", `503 Service Unavailable`, classify.ProviderError{}, false},
		{"a python dict rendering", `{'error': {'message': 'Overloaded', 'type': 'overloaded_error'}}`, classify.ProviderError{}, false},
		{"empty", ``, classify.ProviderError{}, false},
		{"bodies nested past the bound", `{"message":"{\"message\":\"{\\\"message\\\":\\\"{\\\\\\\"message\\\\\\\":\\\\\\\"{\\\\\\\\\\\\\\\"message\\\\\\\\\\\\\\\":\\\\\\\\\\\\\\\"{\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\"message\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\":\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\"deep\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\"}\\\\\\\\\\\\\\\"}\\\\\\\"}\\\"}\"}"}`,
			classify.ProviderError{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := classify.ParseBody([]byte(c.body))
			assert.Equal(t, c.ok, ok)
			if c.name == "bodies nested past the bound" {
				assert.NotEmpty(t, got.Message, "the depth bound stops the reading, not the answer")
				return
			}
			assert.Equal(t, c.want, got)
		})
	}
}

// FuzzParseBody: any bytes are read without a panic, and an answer always
// has something in it.
func FuzzParseBody(f *testing.F) {
	for _, s := range []string{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		`{"error":{"code":429,"message":"{\"error\":{\"message\":\"x\"}}","status":"RESOURCE_EXHAUSTED"}}`,
		`{"error":{"metadata":{"raw":"{\"message\":\"y\"}"}}}`, `{"message":null}`, `{"error":{"code":"1e9"}}`,
		`[{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}]`, `[[[[[[{"message":"x"}]]]]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pe, ok := classify.ParseBody(data)
		if ok && pe.Message == "" && pe.Type == "" && pe.Status == 0 {
			t.Fatalf("an empty answer for %q", data)
		}
		if pe.Status != 0 && (pe.Status < 100 || pe.Status > 599) {
			t.Fatalf("status %d for %q", pe.Status, data)
		}
		// A RetryDelay is short, a delay RetryAfter reads, and the text
		// String makes holds a hint (that one, unless the message holds a
		// form that comes first).
		if pe.RetryDelay != "" {
			if len(pe.RetryDelay) > 32 {
				t.Fatalf("a RetryDelay of %d bytes for %q", len(pe.RetryDelay), data)
			}
			_, ok := classify.RetryAfter("(retryDelay: "+pe.RetryDelay+")", time.Time{})
			got, gotOK := classify.RetryAfter(pe.String(), time.Time{})
			if !ok || !gotOK {
				t.Fatalf("RetryDelay %q: %q reads %v, %v", pe.RetryDelay, pe.String(), got, gotOK)
			}
		}
	})
}
