package providertest

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// AnthropicModel is the model a message names when it names none.
const AnthropicModel = "claude-sonnet-4-5"

// NewAnthropic returns a fake of Anthropic's Messages API: it serves POST
// /v1/messages under BaseURL, sends each reply's request id in the
// request-id header, and refuses, as the API does and without using a reply,
// a request without a key (x-api-key, or an Authorization bearer token:
// 401 authentication_error), without the anthropic-version header, or whose
// body lacks model, max_tokens or messages (400 invalid_request_error).
func NewAnthropic(t testing.TB) *Server {
	return newServer(t, provider{
		name:            "anthropic",
		baseURL:         "http://api.anthropic.test/",
		method:          http.MethodPost,
		path:            "/v1/messages",
		requestIDHeader: "Request-Id",
		check:           anthropicCheck,
		fail: func(status int, message string) Reply {
			typ := map[int]string{404: "not_found_error", 400: "invalid_request_error"}[status]
			if typ == "" {
				typ = "api_error"
			}
			return AnthropicError(status, typ, message)
		},
		events: func(_ *Request, events []Event) []Event { return events },
	})
}

func anthropicCheck(r *Request) (Reply, string, bool) {
	if r.Key() == "" {
		return AnthropicError(http.StatusUnauthorized, "authentication_error", "x-api-key header is required"), "no API key", true
	}
	if r.Header.Get("Anthropic-Version") == "" {
		return AnthropicError(http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required"), "no anthropic-version header", true
	}
	if r.Body == nil {
		msg := "providertest: the request body is not a JSON object"
		return AnthropicError(http.StatusBadRequest, "invalid_request_error", msg), msg, true
	}
	for _, field := range []string{"model", "max_tokens", "messages"} {
		if _, ok := r.Body[field]; !ok {
			msg := field + ": Field required"
			return AnthropicError(http.StatusBadRequest, "invalid_request_error", msg), msg, true
		}
	}
	return Reply{}, "", false
}

// AnthropicMessage is a Messages API response. Reply serves it as the JSON
// message to a request without "stream", and as the documented event stream
// to one with it.
type AnthropicMessage struct {
	// ID defaults to a fixed msg_ id; Model to AnthropicModel.
	ID    string
	Model string
	// Content is the message's blocks, in order.
	Content []AnthropicBlock
	// StopReason defaults to "tool_use" when Content holds a tool use, else
	// "end_turn". Others: "max_tokens", "stop_sequence", "pause_turn",
	// "refusal", "model_context_window_exceeded".
	StopReason string
	// StopSequence is sent when set (null otherwise).
	StopSequence string
	Usage        AnthropicUsage
}

// AnthropicUsage is a message's token counts.
type AnthropicUsage struct {
	InputTokens              int64
	OutputTokens             int64
	CacheCreationInputTokens int64
	CacheReadInputTokens     int64
}

// AnthropicBlock is one content block of a message: make one with
// AnthropicText, AnthropicThinking, AnthropicRedactedThinking or
// AnthropicToolUse.
type AnthropicBlock struct {
	// Type is "text", "thinking", "redacted_thinking" or "tool_use".
	Type string
	// Text is a text block's.
	Text string
	// Thinking and Signature are a thinking block's.
	Thinking  string
	Signature string
	// Data is a redacted thinking block's (opaque, sent back as is).
	Data string
	// ID, Name and Input are a tool use's; Input is sent as a JSON object
	// (nil is {}).
	ID    string
	Name  string
	Input any
}

// AnthropicText returns a text block.
func AnthropicText(text string) AnthropicBlock {
	return AnthropicBlock{Type: "text", Text: text}
}

// AnthropicThinking returns a thinking block and its signature.
func AnthropicThinking(thinking, signature string) AnthropicBlock {
	return AnthropicBlock{Type: "thinking", Thinking: thinking, Signature: signature}
}

// AnthropicRedactedThinking returns a redacted thinking block.
func AnthropicRedactedThinking(data string) AnthropicBlock {
	return AnthropicBlock{Type: "redacted_thinking", Data: data}
}

// AnthropicToolUse returns a tool use block; input is encoded as JSON (a
// value that cannot be, such as a channel, is a mistake in the test: Reply,
// JSON and Events panic on it).
func AnthropicToolUse(id, name string, input any) AnthropicBlock {
	return AnthropicBlock{Type: "tool_use", ID: id, Name: name, Input: input}
}

// Wire shapes, with their fields in the API's order.
type (
	anthropicMessageJSON struct {
		ID           string               `json:"id"`
		Type         string               `json:"type"`
		Role         string               `json:"role"`
		Model        string               `json:"model"`
		Content      []anthropicBlockJSON `json:"content"`
		StopReason   *string              `json:"stop_reason"`
		StopSequence *string              `json:"stop_sequence"`
		Usage        anthropicUsageJSON   `json:"usage"`
	}
	anthropicUsageJSON struct {
		InputTokens              int64 `json:"input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
	}
	anthropicBlockJSON struct {
		Type      string  `json:"type"`
		Text      *string `json:"text,omitempty"`
		Thinking  *string `json:"thinking,omitempty"`
		Signature *string `json:"signature,omitempty"`
		Data      *string `json:"data,omitempty"`
		ID        string  `json:"id,omitempty"`
		Name      string  `json:"name,omitempty"`
		Input     any     `json:"input,omitempty"`
	}
	anthropicStreamJSON struct {
		Type         string                `json:"type"`
		Message      *anthropicMessageJSON `json:"message,omitempty"`
		Index        *int                  `json:"index,omitempty"`
		ContentBlock *anthropicBlockJSON   `json:"content_block,omitempty"`
		Delta        any                   `json:"delta,omitempty"`
		Usage        *anthropicOutputJSON  `json:"usage,omitempty"`
		Error        *anthropicErrorInner  `json:"error,omitempty"`
	}
	anthropicStopJSON struct {
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
	anthropicOutputJSON struct {
		OutputTokens int64 `json:"output_tokens"`
	}
	anthropicDeltaJSON struct {
		Type        string  `json:"type"`
		Text        *string `json:"text,omitempty"`
		Thinking    *string `json:"thinking,omitempty"`
		Signature   *string `json:"signature,omitempty"`
		PartialJSON *string `json:"partial_json,omitempty"`
	}
)

func (m AnthropicMessage) defaults() AnthropicMessage {
	if m.ID == "" {
		m.ID = "msg_01FakeMessage000000000000"
	}
	if m.Model == "" {
		m.Model = AnthropicModel
	}
	if m.StopReason == "" {
		m.StopReason = "end_turn"
		for _, b := range m.Content {
			if b.Type == "tool_use" {
				m.StopReason = "tool_use"
			}
		}
	}
	return m
}

// block returns b as it stands in a whole message, or, with start, as its
// content_block_start event carries it: empty but for a tool use's id and
// name and a redacted block's data.
func (b AnthropicBlock) block(start bool) anthropicBlockJSON {
	empty := ""
	text, thinking, signature := b.Text, b.Thinking, b.Signature
	if start {
		text, thinking, signature = "", "", ""
	}
	out := anthropicBlockJSON{Type: b.Type}
	switch b.Type {
	case "text":
		out.Text = &text
	case "thinking":
		out.Thinking, out.Signature = &thinking, &signature
	case "redacted_thinking":
		data := b.Data
		out.Data = &data
	case "tool_use":
		out.ID, out.Name = b.ID, b.Name
		out.Input = b.input()
		if start {
			out.Input = map[string]any{}
		}
	default:
		out.Text = &empty
	}
	return out
}

func (b AnthropicBlock) input() any {
	if b.Input == nil {
		return map[string]any{}
	}
	return b.Input
}

// JSON returns the message as the API's non-streaming response body.
func (m AnthropicMessage) JSON() []byte {
	m = m.defaults()
	content := make([]anthropicBlockJSON, len(m.Content))
	for i, b := range m.Content {
		content[i] = b.block(false)
	}
	return marshal(anthropicMessageJSON{
		ID: m.ID, Type: "message", Role: "assistant", Model: m.Model, Content: content,
		StopReason: &m.StopReason, StopSequence: nullable(m.StopSequence),
		Usage: anthropicUsageJSON{
			InputTokens: m.Usage.InputTokens, OutputTokens: m.Usage.OutputTokens,
			CacheCreationInputTokens: m.Usage.CacheCreationInputTokens, CacheReadInputTokens: m.Usage.CacheReadInputTokens,
		},
	})
}

// Events returns the message as the API streams it: message_start (the
// message with no content, a null stop reason and the input and cache token
// counts), then for each block content_block_start, its deltas (text and
// thinking word by word, a thinking block's signature in one
// signature_delta, a tool use's input as input_json_delta fragments of at
// most 16 characters after an empty one) and content_block_stop, with one
// ping after the first block's start; then message_delta (the stop reason
// and the output token count) and message_stop.
func (m AnthropicMessage) Events() []Event {
	m = m.defaults()
	start := anthropicMessageJSON{
		ID: m.ID, Type: "message", Role: "assistant", Model: m.Model, Content: []anthropicBlockJSON{},
		Usage: anthropicUsageJSON{
			InputTokens: m.Usage.InputTokens, OutputTokens: min(m.Usage.OutputTokens, 1),
			CacheCreationInputTokens: m.Usage.CacheCreationInputTokens, CacheReadInputTokens: m.Usage.CacheReadInputTokens,
		},
	}
	events := []Event{anthropicEvent(anthropicStreamJSON{Type: "message_start", Message: &start})}
	for i, b := range m.Content {
		block := b.block(true)
		events = append(events, anthropicEvent(anthropicStreamJSON{Type: "content_block_start", Index: &i, ContentBlock: &block}))
		if i == 0 {
			events = append(events, anthropicEvent(anthropicStreamJSON{Type: "ping"}))
		}
		for _, d := range b.deltas() {
			events = append(events, anthropicEvent(anthropicStreamJSON{Type: "content_block_delta", Index: &i, Delta: d}))
		}
		events = append(events, anthropicEvent(anthropicStreamJSON{Type: "content_block_stop", Index: &i}))
	}
	events = append(events,
		anthropicEvent(anthropicStreamJSON{
			Type:  "message_delta",
			Delta: anthropicStopJSON{StopReason: &m.StopReason, StopSequence: nullable(m.StopSequence)},
			Usage: &anthropicOutputJSON{OutputTokens: m.Usage.OutputTokens},
		}),
		anthropicEvent(anthropicStreamJSON{Type: "message_stop"}),
	)
	return events
}

func (b AnthropicBlock) deltas() []anthropicDeltaJSON {
	var out []anthropicDeltaJSON
	switch b.Type {
	case "text":
		for _, w := range words(b.Text) {
			out = append(out, anthropicDeltaJSON{Type: "text_delta", Text: &w})
		}
	case "thinking":
		for _, w := range words(b.Thinking) {
			out = append(out, anthropicDeltaJSON{Type: "thinking_delta", Thinking: &w})
		}
		if b.Signature != "" {
			sig := b.Signature
			out = append(out, anthropicDeltaJSON{Type: "signature_delta", Signature: &sig})
		}
	case "tool_use":
		empty := ""
		out = append(out, anthropicDeltaJSON{Type: "input_json_delta", PartialJSON: &empty})
		for _, c := range chunks(string(marshal(b.input())), 16) {
			out = append(out, anthropicDeltaJSON{Type: "input_json_delta", PartialJSON: &c})
		}
	}
	return out
}

// Reply returns the message as a reply: its JSON, or its events to a request
// that asked for a stream.
func (m AnthropicMessage) Reply() Reply {
	return Reply{Body: m.JSON(), Events: m.Events()}
}

// anthropicEvent returns e as an event named by its type.
func anthropicEvent(e anthropicStreamJSON) Event {
	return Event{Name: e.Type, Data: string(marshal(e))}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

type (
	anthropicErrorJSON struct {
		Type      string              `json:"type"`
		Error     anthropicErrorInner `json:"error"`
		RequestID string              `json:"request_id,omitempty"`
	}
	anthropicErrorInner struct {
		Type    string            `json:"type"`
		Message string            `json:"message"`
		Details map[string]string `json:"details,omitempty"`
	}
)

func anthropicErrorBody(typ, message, code, requestID string) []byte {
	e := anthropicErrorJSON{Type: "error", Error: anthropicErrorInner{Type: typ, Message: message}, RequestID: requestID}
	if code != "" {
		e.Error.Details = map[string]string{"error_code": code}
	}
	return marshal(e)
}

// AnthropicError returns the API's error reply: the status, the body
// {"type":"error","error":{"type":typ,"message":message},"request_id":...}
// and the same id in the request-id header. The documented pairs are 400
// invalid_request_error, 401 authentication_error, 402 billing_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error, 500 api_error and 529 overloaded_error (Anthropic's SDK also
// knows 504 timeout_error).
func AnthropicError(status int, typ, message string) Reply {
	return anthropicError(status, typ, message, "")
}

func anthropicError(status int, typ, message, code string) Reply {
	id := newRequestID()
	return Reply{
		Status: status,
		Header: http.Header{"Request-Id": {id}, "Content-Type": {"application/json"}},
		Body:   anthropicErrorBody(typ, message, code, id),
	}
}

// AnthropicOverloaded returns the API's 529 overloaded_error, "Overloaded".
func AnthropicOverloaded() Reply {
	return AnthropicError(529, "overloaded_error", "Overloaded")
}

// AnthropicPromptTooLong returns the API's 400 for a prompt over the
// model's context window: "prompt is too long: 213462 tokens > 200000
// maximum".
func AnthropicPromptTooLong(tokens, maximum int) Reply {
	return AnthropicError(http.StatusBadRequest, "invalid_request_error",
		fmt.Sprintf("prompt is too long: %d tokens > %d maximum", tokens, maximum))
}

// AnthropicCreditBalanceTooLow returns the API's 400 for an account out of
// credit.
func AnthropicCreditBalanceTooLow() Reply {
	return AnthropicError(http.StatusBadRequest, "invalid_request_error",
		"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")
}

// AnthropicSpendLimit returns the API's 429 for an organization at its
// monthly spend limit: a rate_limit_error whose error.details.error_code is
// "enforced_spend_limit_reached", with no retry-after (waiting does not
// help until the limit resets).
func AnthropicSpendLimit() Reply {
	return anthropicError(http.StatusTooManyRequests, "rate_limit_error",
		"You have reached your organization's monthly spend limit. Usage resumes at the start of the next month or when your limit is raised.",
		"enforced_spend_limit_reached")
}

// AnthropicRateLimit returns the API's 429 rate_limit_error with the
// headers it sends: retry-after (whole seconds, rounded up) and the
// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
// {limit,remaining,reset} family, the resets as RFC 3339 times retryAfter
// after now, the requests exhausted.
func AnthropicRateLimit(retryAfter time.Duration, now time.Time) Reply {
	r := AnthropicError(http.StatusTooManyRequests, "rate_limit_error",
		"This request would exceed your organization's rate limit of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later.")
	reset := now.Add(retryAfter).UTC().Format(time.RFC3339)
	h := r.Header
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	for _, limit := range []struct {
		name             string
		limit, remaining int
	}{
		{"requests", 50, 0},
		{"tokens", 100000, 90000},
		{"input-tokens", 80000, 72000},
		{"output-tokens", 20000, 18000},
	} {
		h.Set("Anthropic-Ratelimit-"+limit.name+"-Limit", strconv.Itoa(limit.limit))
		h.Set("Anthropic-Ratelimit-"+limit.name+"-Remaining", strconv.Itoa(limit.remaining))
		h.Set("Anthropic-Ratelimit-"+limit.name+"-Reset", reset)
	}
	return r
}

// AnthropicErrorEvent returns the stream's error event, which the API sends
// in place of the rest of a stream that fails after its 200 status:
// event "error", data {"type":"error","error":{"type":typ,"message":message}}.
func AnthropicErrorEvent(typ, message string) Event {
	return anthropicEvent(anthropicStreamJSON{Type: "error", Error: &anthropicErrorInner{Type: typ, Message: message}})
}
