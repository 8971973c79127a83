package providertest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// OpenAIModel is the model a completion names when it names none.
const OpenAIModel = "gpt-4o-mini"

// NewOpenAI returns a fake of OpenAI's Chat Completions API: it serves POST
// /v1/chat/completions under BaseURL (which ends in /v1/, as the base URL of
// any OpenAI-compatible server does), sends each reply's request id in the
// x-request-id header, and refuses, as the API does and without using a
// reply, a request without an Authorization bearer token (401), whose body
// is not JSON, that lacks model or messages, or that has stream_options
// without a stream (400 invalid_request_error).
// The usage chunk of a stream (choices empty, usage set) is sent only to a
// request that asked for it with "stream_options": {"include_usage": true}.
func NewOpenAI(t testing.TB) *Server {
	return newServer(t, provider{
		name:            "openai",
		baseURL:         "http://api.openai.test/v1/",
		method:          http.MethodPost,
		path:            "/v1/chat/completions",
		requestIDHeader: "X-Request-Id",
		check:           openAICheck,
		fail: func(status int, message string) Reply {
			typ := "invalid_request_error"
			if status >= 500 {
				typ = "server_error"
			}
			return OpenAIError(status, typ, "", "", message)
		},
		events: openAIEvents,
	})
}

func openAICheck(r *Request) (Reply, string, bool) {
	if _, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || r.Key() == "" {
		return OpenAIError(http.StatusUnauthorized, "invalid_request_error", "", "",
				"You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username and password. You can obtain an API key from https://platform.openai.com/account/api-keys."),
			"no API key", true
	}
	if r.Body == nil {
		return OpenAIError(http.StatusBadRequest, "invalid_request_error", "", "",
				"We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)"),
			"the body is not a JSON object", true
	}
	if _, ok := r.Body["model"]; !ok {
		return OpenAIError(http.StatusBadRequest, "invalid_request_error", "", "", "you must provide a model parameter"), "no model", true
	}
	if _, ok := r.Body["messages"]; !ok {
		return OpenAIError(http.StatusBadRequest, "invalid_request_error", "missing_required_parameter", "messages",
			"Missing required parameter: 'messages'."), "no messages", true
	}
	if _, ok := r.Body["stream_options"]; ok && !r.Stream {
		return OpenAIError(http.StatusBadRequest, "invalid_request_error", "", "stream_options",
			"The 'stream_options' parameter is only allowed when 'stream' is enabled."), "stream_options without a stream", true
	}
	return Reply{}, "", false
}

// openAIEvents drops the usage chunk unless the request asked for it.
func openAIEvents(r *Request, events []Event) []Event {
	opts, _ := r.Body["stream_options"].(map[string]any)
	if opts["include_usage"] == true {
		return events
	}
	out := make([]Event, 0, len(events))
	for _, e := range events {
		var chunk struct {
			Choices []json.RawMessage `json:"choices"`
			Usage   json.RawMessage   `json:"usage"`
		}
		if json.Unmarshal([]byte(e.Data), &chunk) == nil && chunk.Choices != nil && len(chunk.Choices) == 0 &&
			len(chunk.Usage) > 0 && string(chunk.Usage) != "null" {
			continue
		}
		out = append(out, e)
	}
	return out
}

// OpenAICompletion is a Chat Completions response with one choice. Reply
// serves it as the chat.completion JSON to a request without "stream", and
// as chat.completion.chunk events to one with it.
type OpenAICompletion struct {
	// ID defaults to a fixed chatcmpl- id; Model to OpenAIModel.
	ID    string
	Model string
	// Content is the assistant's text (null in the JSON when empty and
	// there are tool calls).
	Content   string
	ToolCalls []OpenAIToolCall
	// FinishReason defaults to "tool_calls" when there are tool calls, else
	// "stop". Others: "length", "content_filter".
	FinishReason string
	Usage        OpenAIUsage
}

// OpenAIToolCall is a function call of the assistant. Arguments is the JSON
// text the model wrote, sent as a string: a model can write invalid JSON.
type OpenAIToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// OpenAIUsage is a completion's token counts; the total is their sum.
type OpenAIUsage struct {
	PromptTokens     int64
	CompletionTokens int64
	// CachedTokens is prompt_tokens_details.cached_tokens, the part of the
	// prompt read from the cache.
	CachedTokens int64
	// ReasoningTokens is completion_tokens_details.reasoning_tokens.
	ReasoningTokens int64
}

type (
	openAICompletionJSON struct {
		ID                string             `json:"id"`
		Object            string             `json:"object"`
		Created           int64              `json:"created"`
		Model             string             `json:"model"`
		SystemFingerprint string             `json:"system_fingerprint"`
		Choices           []openAIChoiceJSON `json:"choices"`
		Usage             *openAIUsageJSON   `json:"usage,omitempty"`
	}
	openAIChoiceJSON struct {
		Index        int                `json:"index"`
		Message      *openAIMessageJSON `json:"message,omitempty"`
		Delta        *openAIDeltaJSON   `json:"delta,omitempty"`
		Logprobs     *struct{}          `json:"logprobs"`
		FinishReason *string            `json:"finish_reason"`
	}
	openAIMessageJSON struct {
		Role      string               `json:"role"`
		Content   *string              `json:"content"`
		Refusal   *string              `json:"refusal"`
		ToolCalls []openAIToolCallJSON `json:"tool_calls,omitempty"`
	}
	openAIDeltaJSON struct {
		Role      string               `json:"role,omitempty"`
		Content   *string              `json:"content,omitempty"`
		ToolCalls []openAIToolCallJSON `json:"tool_calls,omitempty"`
	}
	openAIToolCallJSON struct {
		Index    *int   `json:"index,omitempty"`
		ID       string `json:"id,omitempty"`
		Type     string `json:"type,omitempty"`
		Function struct {
			Name      string  `json:"name,omitempty"`
			Arguments *string `json:"arguments,omitempty"`
		} `json:"function"`
	}
	openAIUsageJSON struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		TotalTokens         int64 `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
			AudioTokens  int64 `json:"audio_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens          int64 `json:"reasoning_tokens"`
			AudioTokens              int64 `json:"audio_tokens"`
			AcceptedPredictionTokens int64 `json:"accepted_prediction_tokens"`
			RejectedPredictionTokens int64 `json:"rejected_prediction_tokens"`
		} `json:"completion_tokens_details"`
	}
)

const openAICreated = 1700000000

func (c OpenAICompletion) defaults() OpenAICompletion {
	if c.ID == "" {
		c.ID = "chatcmpl-Fake000000000000000000000000"
	}
	if c.Model == "" {
		c.Model = OpenAIModel
	}
	if c.FinishReason == "" {
		c.FinishReason = "stop"
		if len(c.ToolCalls) > 0 {
			c.FinishReason = "tool_calls"
		}
	}
	return c
}

func (u OpenAIUsage) json() *openAIUsageJSON {
	out := &openAIUsageJSON{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	out.PromptTokensDetails.CachedTokens = u.CachedTokens
	out.CompletionTokensDetails.ReasoningTokens = u.ReasoningTokens
	return out
}

func (c OpenAICompletion) envelope(object string) openAICompletionJSON {
	return openAICompletionJSON{ID: c.ID, Object: object, Created: openAICreated, Model: c.Model, SystemFingerprint: "fp_fake"}
}

// JSON returns the completion as the API's non-streaming response body.
func (c OpenAICompletion) JSON() []byte {
	c = c.defaults()
	msg := &openAIMessageJSON{Role: "assistant"}
	if c.Content != "" || len(c.ToolCalls) == 0 {
		msg.Content = &c.Content
	}
	for _, tc := range c.ToolCalls {
		var j openAIToolCallJSON
		j.ID, j.Type = tc.ID, "function"
		args := tc.Arguments
		j.Function.Name, j.Function.Arguments = tc.Name, &args
		msg.ToolCalls = append(msg.ToolCalls, j)
	}
	out := c.envelope("chat.completion")
	out.Choices = []openAIChoiceJSON{{Message: msg, FinishReason: &c.FinishReason}}
	out.Usage = c.Usage.json()
	return marshal(out)
}

// Events returns the completion as the API streams it, each a
// chat.completion.chunk in a "data:" event: one with the role, the content
// word by word, for each tool call one chunk with its index, id, name and
// empty arguments then its arguments in fragments of at most 16
// characters, a chunk with an empty delta and the finish reason, the usage
// chunk (choices empty; the fake sends it only when the request asked for
// it), and "[DONE]".
func (c OpenAICompletion) Events() []Event {
	c = c.defaults()
	chunk := func(delta *openAIDeltaJSON, finish *string) Event {
		out := c.envelope("chat.completion.chunk")
		out.Choices = []openAIChoiceJSON{{Delta: delta, FinishReason: finish}}
		return Event{Data: string(marshal(out))}
	}
	empty := ""
	events := []Event{chunk(&openAIDeltaJSON{Role: "assistant", Content: &empty}, nil)}
	for _, w := range words(c.Content) {
		events = append(events, chunk(&openAIDeltaJSON{Content: &w}, nil))
	}
	for i, tc := range c.ToolCalls {
		var first openAIToolCallJSON
		first.Index, first.ID, first.Type = &i, tc.ID, "function"
		first.Function.Name, first.Function.Arguments = tc.Name, &empty
		events = append(events, chunk(&openAIDeltaJSON{ToolCalls: []openAIToolCallJSON{first}}, nil))
		for _, a := range chunks(tc.Arguments, 16) {
			var more openAIToolCallJSON
			more.Index, more.Function.Arguments = &i, &a
			events = append(events, chunk(&openAIDeltaJSON{ToolCalls: []openAIToolCallJSON{more}}, nil))
		}
	}
	events = append(events, chunk(&openAIDeltaJSON{}, &c.FinishReason))
	usage := c.envelope("chat.completion.chunk")
	usage.Choices = []openAIChoiceJSON{}
	usage.Usage = c.Usage.json()
	events = append(events, Event{Data: string(marshal(usage))}, OpenAIDone)
	return events
}

// Reply returns the completion as a reply: its JSON, or its events to a
// request that asked for a stream.
func (c OpenAICompletion) Reply() Reply {
	return Reply{Body: c.JSON(), Events: c.Events()}
}

// OpenAIDone is the stream's last event, "data: [DONE]".
var OpenAIDone = Event{Data: "[DONE]"}

type openAIErrorJSON struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func openAIErrorBody(typ, code, param, message string) []byte {
	return marshal(struct {
		Error openAIErrorJSON `json:"error"`
	}{openAIErrorJSON{Message: message, Type: typ, Param: nullable(param), Code: nullable(code)}})
}

// OpenAIError returns the API's error reply: the status, the body
// {"error":{"message":message,"type":typ,"param":param,"code":code}} (an
// empty param or code is null) and an x-request-id header.
func OpenAIError(status int, typ, code, param, message string) Reply {
	return Reply{
		Status: status,
		Header: http.Header{"X-Request-Id": {newRequestID()}, "Content-Type": {"application/json"}},
		Body:   openAIErrorBody(typ, code, param, message),
	}
}

// OpenAIContextLengthExceeded returns the API's 400 for messages over the
// model's context window: code context_length_exceeded, "This model's
// maximum context length is 128000 tokens. However, your messages resulted
// in 130000 tokens. Please reduce the length of the messages."
func OpenAIContextLengthExceeded(maximum, tokens int) Reply {
	return OpenAIError(http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", "messages",
		fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", maximum, tokens))
}

// OpenAIInvalidAPIKey returns the API's 401 for a wrong key, which it
// names masked.
func OpenAIInvalidAPIKey(key string) Reply {
	masked := key
	if len(masked) > 8 {
		masked = masked[:3] + strings.Repeat("*", len(masked)-7) + masked[len(masked)-4:]
	}
	return OpenAIError(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "",
		"Incorrect API key provided: "+masked+". You can find your API key at https://platform.openai.com/account/api-keys.")
}

// OpenAIRateLimit returns the API's 429 rate_limit_exceeded (type
// "requests") with its headers: retry-after (whole seconds, rounded up) and
// x-ratelimit-{limit,remaining,reset}-{requests,tokens}, the resets as
// durations ("120ms", "6m0s"), the requests exhausted.
func OpenAIRateLimit(retryAfter time.Duration) Reply {
	r := OpenAIError(http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "",
		fmt.Sprintf("Rate limit reached for %s in organization org-fake on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.", OpenAIModel, retryAfter))
	h := r.Header
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	h.Set("X-Ratelimit-Limit-Requests", "500")
	h.Set("X-Ratelimit-Remaining-Requests", "0")
	h.Set("X-Ratelimit-Reset-Requests", retryAfter.String())
	h.Set("X-Ratelimit-Limit-Tokens", "200000")
	h.Set("X-Ratelimit-Remaining-Tokens", "199000")
	h.Set("X-Ratelimit-Reset-Tokens", (retryAfter / 10).String())
	return r
}

// OpenAIInsufficientQuota returns the API's 429 for an account out of
// quota: type and code insufficient_quota. Retrying does not help.
func OpenAIInsufficientQuota() Reply {
	return OpenAIError(http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota", "",
		"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.")
}

// OpenAIServerError returns the API's 500 server_error.
func OpenAIServerError() Reply {
	return OpenAIError(http.StatusInternalServerError, "server_error", "", "",
		"The server had an error while processing your request. Sorry about that!")
}

// OpenAIOverloaded returns the API's 503 for an engine over capacity.
func OpenAIOverloaded() Reply {
	return OpenAIError(http.StatusServiceUnavailable, "server_error", "", "",
		"That model is currently overloaded with other requests. You can retry your request, or contact us through our help center at help.openai.com if the error persists.")
}

// OpenAIErrorEvent returns an error in a stream, as OpenAI-compatible
// servers send one after their 200 status: data {"error":{...}}, the body of
// OpenAIError.
func OpenAIErrorEvent(typ, code, message string) Event {
	return Event{Data: string(openAIErrorBody(typ, code, "", message))}
}
