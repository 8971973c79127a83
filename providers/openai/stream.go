package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/apicall"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// ErrIncompleteStream is wrapped by the error of a stream that ended
// without a finish reason; it matches io.ErrUnexpectedEOF, so the session
// retries it as a transient failure.
var ErrIncompleteStream = fmt.Errorf("openai: the stream ended before the model finished: %w", io.ErrUnexpectedEOF)

// idleError is the failure of a call that received nothing for too long:
// transient, as it matches context.DeadlineExceeded and, where the Go
// error is lost (a message that crossed a Temporal activity's boundary, a
// history), as its text says "timed out" (of the extended rules).
type idleError struct{ d time.Duration }

func (e *idleError) Error() string {
	return fmt.Sprintf("openai: timed out: no data from the server for %s (Options.IdleTimeout)", e.d)
}

func (e *idleError) Unwrap() error { return context.DeadlineExceeded }

// now is the time of a message, in milliseconds since the Unix epoch.
func now() int64 { return time.Now().UnixMilli() }

// call makes the model calls of one run.
type call struct {
	agent *Agent
	key   string
	model string
	emit  func(events.Event)
}

// toolCall is a tool call as it streams in.
type toolCall struct {
	block int // its index in the message's content
	id    string
	name  strings.Builder
	args  strings.Builder
}

// do makes one streaming call and returns its assistant message, having
// emitted MessageStart and the deltas (not MessageEnd).
func (c *call) do(ctx context.Context, params request) transcript.Message {
	head := transcript.Message{Role: transcript.RoleAssistant, Provider: c.agent.opts.Provider, Model: c.model, Timestamp: now()}
	c.emit(events.MessageStart{Message: head})

	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	alive := func() {}
	if d := c.agent.opts.IdleTimeout; d > 0 {
		idle := time.AfterFunc(d, func() { cancel(&idleError{d}) })
		defer idle.Stop()
		alive = func() { idle.Reset(d) }
	}

	// The text and thinking are built apart and set in content at the end:
	// appending each delta to a block's string would copy the text so far,
	// making an answer of many deltas cost the square of its length.
	var (
		content  []transcript.Block
		text     = -1 // the text block's index, once there is one
		thinking = -1
		texts    strings.Builder
		thoughts strings.Builder
		calls    = map[int64]*toolCall{} // the call each index is at
		made     []*toolCall             // every call, in order
		finish   string
		usage    *transcript.Usage
	)
	update := func(kind string, index int, s string) {
		c.emit(events.MessageUpdate{Message: head, Delta: events.Delta{Kind: kind, Index: index, Text: s}})
	}
	var header http.Header
	read := func(chunk chunk) bool {
		alive()
		if chunk.Usage != nil && chunk.Usage.PromptTokens != nil {
			usage = usageOf(*chunk.Usage)
		}
		// The usage chunk has no choice; a server may send others. Only
		// the first choice is read (the request asks for one).
		i := slices.IndexFunc(chunk.Choices, func(c chunkChoice) bool { return c.Index == 0 })
		if i < 0 {
			return true
		}
		choice := chunk.Choices[i]
		d := choice.Delta
		if r, field := reasoning(d); r != "" {
			if thinking < 0 {
				// The signature names the field the reasoning came in, so
				// it goes back to the same model in that field.
				content = append(content, transcript.Block{Type: transcript.BlockThinking, ThinkingSignature: field})
				thinking = len(content) - 1
			}
			thoughts.WriteString(r)
			update("thinking", thinking, r)
		}
		if d.Content != nil && *d.Content != "" {
			if text < 0 {
				content = append(content, transcript.TextBlock(""))
				text = len(content) - 1
			}
			texts.WriteString(*d.Content)
			update("text", text, *d.Content)
		}
		for _, tc := range d.ToolCalls {
			t := calls[tc.Index]
			// A new id at an index taken is another call: some compatible
			// servers send every call at index 0 (or with no index), each
			// whole with its own id; gathered by index alone, their
			// arguments would run together into one call.
			if t == nil || (tc.ID != "" && t.id != "" && tc.ID != t.id) {
				content = append(content, transcript.Block{Type: transcript.BlockToolCall})
				t = &toolCall{block: len(content) - 1}
				calls[tc.Index] = t
				made = append(made, t)
			}
			if tc.ID != "" {
				t.id = tc.ID
			}
			if tc.Function.Name != "" {
				t.name.WriteString(tc.Function.Name)
			}
			if tc.Function.Arguments != "" {
				t.args.WriteString(tc.Function.Arguments)
				update("toolCall", t.block, tc.Function.Arguments)
			}
		}
		if choice.FinishReason != nil && *choice.FinishReason != "" {
			finish = *choice.FinishReason
		}
		return true
	}
	err := func() error {
		body, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("openai: encoding the request: %w", err)
		}
		resp, err := post(callCtx, c.agent.opts.HTTPClient, c.agent.opts.BaseURL, c.key, body)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		header = resp.Header
		alive()
		return readChunks(resp.Body, read)
	}()
	if text >= 0 {
		content[text].Text = texts.String()
	}
	if thinking >= 0 {
		content[thinking].Thinking = thoughts.String()
	}
	if err == nil && finish == "" {
		err = ErrIncompleteStream
	}
	var idle *idleError
	if err != nil && ctx.Err() == nil && errors.As(context.Cause(callCtx), &idle) {
		err = idle
	}
	switch {
	case ctx.Err() != nil:
		m := head
		m.StopReason = transcript.StopReasonAborted
		m.ErrorMessage = "Request was aborted"
		m.Content = partial(content)
		m.Usage = usage
		m.Timestamp = now()
		return m
	case err != nil:
		m := failed(header, err)
		m.Provider, m.Model, m.Timestamp = head.Provider, head.Model, now()
		return m
	}

	for _, t := range made {
		content[t.block] = transcript.Block{Type: transcript.BlockToolCall, ID: t.id, Name: t.name.String(), Arguments: arguments(t.args.String())}
	}
	m := head
	m.Content = content
	m.Usage = usage
	m.Timestamp = now()
	switch finish {
	case "tool_calls", "function_call":
		m.StopReason = transcript.StopReasonToolUse
	case "length":
		m.StopReason = transcript.StopReasonLength
	case "content_filter":
		m.StopReason = transcript.StopReasonError
		m.ErrorMessage = "content_filter: the provider's content filter stopped the answer"
		m.ErrorType = "content_filter"
	default:
		m.StopReason = transcript.StopReasonStop
	}
	// Some compatible servers (Ollama among them) finish a tool call with
	// "stop": the calls decide.
	if len(made) > 0 && m.StopReason == transcript.StopReasonStop {
		m.StopReason = transcript.StopReasonToolUse
	}
	return m
}

// failed is the message of a call that failed with err; header is the
// stream's, when one came.
//
// The message's Err holds nothing of the request (whose header holds the
// key) or of the body (which ErrorMessage sums up): an error status's is
// the method, the URL with any password masked, the status and the
// request id.
func failed(header http.Header, err error) transcript.Message {
	var streamErr *streamError
	var idle *idleError
	if errors.As(err, &idle) {
		return session.FailedMessage(0, header, nil, err)
	}
	// An error status's body may be OpenAI's {"error":{…}}, a compatible
	// server's {"error":"…"} or a proxy's HTML: FailedMessage reads each.
	if m, ok := apicall.Failed(err); ok {
		return m
	}
	if errors.As(err, &streamErr) {
		return session.FailedMessage(0, header, streamErr.data, errors.New(streamErr.Error()))
	}
	return session.FailedMessage(0, header, nil, session.ClipError(fmt.Errorf("openai: reading the stream: %w", err)))
}

// partial is the content of a call cut short: its text and thinking (a
// tool call's arguments may be incomplete).
func partial(content []transcript.Block) []transcript.Block {
	var out []transcript.Block
	for _, b := range content {
		if b.Type != transcript.BlockToolCall {
			out = append(out, b)
		}
	}
	return out
}

// arguments returns a tool call's arguments as a JSON object: the model's
// text compacted, {} when it is empty, and {"_raw": text} when it is not
// a JSON object (the tool then sees what the model wrote).
func arguments(s string) json.RawMessage {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	var buf bytes.Buffer
	if json.Unmarshal([]byte(s), &obj) == nil && obj != nil && json.Compact(&buf, []byte(s)) == nil {
		return buf.Bytes()
	}
	raw, _ := json.Marshal(map[string]string{"_raw": s})
	return raw
}

// reasoningFields are the fields of a delta, and of an assistant message
// sent back, that carry the model's reasoning on the compatible servers
// that stream it: "reasoning_content" (DeepSeek, vLLM) and "reasoning"
// (OpenRouter, Ollama, llama.cpp).
var reasoningFields = []string{"reasoning_content", "reasoning"}

// reasoning is the reasoning text of a delta and the field it came in.
func reasoning(d chunkDelta) (text, field string) {
	for i, f := range []*string{d.ReasoningContent, d.Reasoning} {
		if f != nil && *f != "" {
			return *f, reasoningFields[i]
		}
	}
	return "", ""
}

// usageOf converts the API's usage: the cached prompt tokens are cache
// reads, the rest input. A negative count (which no server should send)
// is 0; the total, when the server sends none, is the prompt and
// completion tokens, saturating at math.MaxInt.
func usageOf(u usageWire) *transcript.Usage {
	prompt, cached := count(*u.PromptTokens), count(u.PromptTokensDetails.CachedTokens)
	out := &transcript.Usage{
		Input:       max(prompt-cached, 0),
		Output:      count(u.CompletionTokens),
		CacheRead:   cached,
		CacheWrite:  count(u.PromptTokensDetails.CacheWriteTokens),
		TotalTokens: count(u.TotalTokens),
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = prompt + min(out.Output, math.MaxInt-prompt)
	}
	return out
}

// count is a token count of the API as an int: at least 0, at most
// math.MaxInt.
func count(n int64) int {
	return int(min(max(n, 0), math.MaxInt))
}

// summaryPrefix introduces a compaction's summary, sent as a user message.
const summaryPrefix = "The conversation before this point was compacted into this summary:\n\n"

// messages converts the session's context to the API's messages.
//
// User messages keep their text and images (as data URLs); a compaction
// summary is a user message. Assistant messages keep their text and tool
// calls, and failed and aborted calls are dropped. An assistant message's
// thinking goes back only to the model that wrote it (its provider and
// model are provider and model), in the field it came in
// ("reasoning_content" or "reasoning", its ThinkingSignature), as DeepSeek
// requires of a turn with tool calls and OpenRouter and Ollama accept;
// any other thinking is dropped (OpenAI's own API takes none). A tool result is a "tool" message of its
// text; its images follow in a user message, as a tool message holds text
// only. A tool call without a result, and a result without its call, are
// left out: the API refuses either.
func messages(ctx []transcript.Message, provider, model string) []messageParam {
	answered, called := map[string]bool{}, map[string]bool{}
	for _, m := range ctx {
		if m.Role == transcript.RoleToolResult {
			answered[m.ToolCallID] = true
		}
	}
	var out []messageParam
	var images []any
	flush := func() {
		if len(images) > 0 {
			parts := append([]any{textPart{Type: "text", Text: "The images the tools returned:"}}, images...)
			out = append(out, messageParam{Role: "user", Content: parts})
			images = nil
		}
	}
	for _, m := range ctx {
		if m.Role != transcript.RoleToolResult {
			flush()
		}
		switch m.Role {
		case transcript.RoleUser:
			out = append(out, userMessage(m))
		case transcript.RoleSummary:
			out = append(out, messageParam{Role: "user", Content: summaryPrefix + texts(m.Content)})
		case transcript.RoleAssistant:
			if msg, ok := assistantMessage(m, answered, called, m.Provider == provider && m.Model == model); ok {
				out = append(out, msg)
			}
		case transcript.RoleToolResult:
			if !called[m.ToolCallID] {
				continue
			}
			text := texts(m.Content)
			for _, b := range m.Content {
				if b.Type == transcript.BlockImage {
					images = append(images, imageOf(b))
				}
			}
			out = append(out, messageParam{Role: "tool", Content: text, ToolCallID: m.ToolCallID})
		}
	}
	flush()
	return out
}

func userMessage(m transcript.Message) messageParam {
	hasImage := false
	for _, b := range m.Content {
		hasImage = hasImage || b.Type == transcript.BlockImage
	}
	if !hasImage {
		return messageParam{Role: "user", Content: texts(m.Content)}
	}
	var parts []any
	for _, b := range m.Content {
		switch b.Type {
		case transcript.BlockText:
			parts = append(parts, textPart{Type: "text", Text: b.Text})
		case transcript.BlockImage:
			parts = append(parts, imageOf(b))
		}
	}
	return messageParam{Role: "user", Content: parts}
}

func imageOf(b transcript.Block) imagePart {
	return imagePart{Type: "image_url", ImageURL: imageURL{URL: "data:" + b.MimeType + ";base64," + b.Data}}
}

// assistantMessage converts an assistant message, with its reasoning when
// own (the model that wrote it is the one called); false when there is
// nothing to send.
func assistantMessage(m transcript.Message, answered, called map[string]bool, own bool) (messageParam, bool) {
	if m.StopReason == transcript.StopReasonError || m.StopReason == transcript.StopReasonAborted {
		return messageParam{}, false
	}
	p := messageParam{Role: "assistant"}
	text := texts(m.Content)
	for _, b := range m.Content {
		if b.Type != transcript.BlockToolCall || !answered[b.ID] {
			continue
		}
		called[b.ID] = true
		args := string(b.Arguments)
		if args == "" {
			args = "{}"
		}
		p.ToolCalls = append(p.ToolCalls, toolCallParam{ID: b.ID, Type: "function", Function: functionCall{Name: b.Name, Arguments: args}})
	}
	if text == "" && len(p.ToolCalls) == 0 {
		// Reasoning alone is no message: the API wants content or calls.
		return messageParam{}, false
	}
	if text != "" {
		p.Content = text
	}
	if own {
		if field, thought := ownReasoning(m.Content); thought != "" {
			p.ReasoningField, p.Reasoning = field, thought
		}
	}
	return p, true
}

// ownReasoning is the reasoning of content to send back: the thinking
// blocks whose signature names a reasoning field, joined, and the field
// (the first block's).
func ownReasoning(content []transcript.Block) (field, text string) {
	var parts []string
	for _, b := range content {
		if b.Type != transcript.BlockThinking || b.Thinking == "" || !slices.Contains(reasoningFields, b.ThinkingSignature) {
			continue
		}
		if field == "" {
			field = b.ThinkingSignature
		}
		parts = append(parts, b.Thinking)
	}
	return field, strings.Join(parts, "\n")
}

// texts joins the text blocks of content.
func texts(content []transcript.Block) string {
	var parts []string
	for _, b := range content {
		if b.Type == transcript.BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}
