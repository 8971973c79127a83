package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/agentfsm/agentfsm/internal/apicall"
	"github.com/agentfsm/agentfsm/internal/sse"
	"github.com/agentfsm/agentfsm/session"
)

// The Messages API as this package speaks it over net/http: the request
// body of a streamed call, the blocks of its messages and the events of
// its answer (docs/providers.md, "The Anthropic adapter").

// DefaultBaseURL is the API's base URL when Options.BaseURL is empty.
const DefaultBaseURL = "https://api.anthropic.com/"

// apiVersion is the anthropic-version header each request sends.
const apiVersion = "2023-06-01"

// request is the body of POST /v1/messages.
type request struct {
	Model     string         `json:"model"`
	MaxTokens int64          `json:"max_tokens"`
	Messages  []messageParam `json:"messages"`
	System    []textParam    `json:"system,omitempty"`
	Tools     []toolParam    `json:"tools,omitempty"`
	Stream    bool           `json:"stream"`
}

// messageParam is a message of the request: role "user" or "assistant",
// and its blocks (each one of the *Param types below).
type messageParam struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

type textParam struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

func newText(s string) textParam { return textParam{Type: "text", Text: s} }

type imageParam struct {
	Type   string      `json:"type"` // "image"
	Source imageSource `json:"source"`
}

type imageSource struct {
	Type      string `json:"type"` // "base64"
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

func newImage(mime, data string) imageParam {
	return imageParam{Type: "image", Source: imageSource{Type: "base64", MediaType: mime, Data: data}}
}

type thinkingParam struct {
	Type      string `json:"type"` // "thinking"
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type redactedThinkingParam struct {
	Type string `json:"type"` // "redacted_thinking"
	Data string `json:"data"`
}

type toolUseParam struct {
	Type  string          `json:"type"` // "tool_use"
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type toolResultParam struct {
	Type      string `json:"type"` // "tool_result"
	ToolUseID string `json:"tool_use_id"`
	IsError   bool   `json:"is_error,omitempty"`
	Content   []any  `json:"content,omitempty"` // textParam and imageParam
}

// toolParam is a tool the model may call.
type toolParam struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	InputSchema map[string]any `json:"input_schema"`
}

// event is one event of the stream, the fields of every type in one.
type event struct {
	Type         string       `json:"type"`
	Message      *message     `json:"message"`       // message_start
	Index        int64        `json:"index"`         // content_block_*
	ContentBlock *block       `json:"content_block"` // content_block_start
	Delta        eventDelta   `json:"delta"`         // content_block_delta, message_delta
	Usage        *deltaUsage  `json:"usage"`         // message_delta
	Error        *errorObject `json:"error"`         // error
}

type eventDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Thinking    string `json:"thinking"`
	Signature   string `json:"signature"`
	PartialJSON string `json:"partial_json"`
	StopReason  string `json:"stop_reason"`
}

type errorObject struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// message is the answer as message_start begins it and the later events
// complete it.
type message struct {
	Content    []block   `json:"content"`
	StopReason string    `json:"stop_reason"`
	Usage      usageWire `json:"usage"`
}

// block is a content block of the answer.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type usageWire struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// deltaUsage is message_delta's usage: cumulative counts, each one
// present only when it applies.
type deltaUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
}

// apply sets the counts u has on w.
func (u *deltaUsage) apply(w *usageWire) {
	for _, f := range []struct {
		from *int64
		to   *int64
	}{
		{u.InputTokens, &w.InputTokens}, {u.OutputTokens, &w.OutputTokens},
		{u.CacheReadInputTokens, &w.CacheReadInputTokens}, {u.CacheCreationInputTokens, &w.CacheCreationInputTokens},
	} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
}

// streamError is an error event of the stream after its 200: data is the
// event's data.
type streamError struct{ data []byte }

func (e *streamError) Error() string { return "anthropic: an error event in the stream" }

// api is how the call is made over HTTP: the key in x-api-key (and
// Authorization, should a proxy's client set it), the request's id in
// request-id.
var api = apicall.API{Name: "anthropic", Keys: []string{"X-Api-Key", "Authorization"}, RequestID: "Request-Id", RequestIDLabel: "Request-ID"}

// post sends the streamed request body to the Messages endpoint of base
// with key and returns the events of the answer, or apicall's error for
// an error status or a document, or the transport's error. The caller
// closes the body.
func post(ctx context.Context, client *http.Client, base, key string, body []byte) (*http.Response, error) {
	if base == "" {
		base = DefaultBaseURL
	}
	endpoint, err := url.JoinPath(base, "v1/messages")
	if err != nil {
		return nil, api.BaseURLError(base, err)
	}
	return api.Post(ctx, client, base, endpoint, body, func(h http.Header) {
		h.Set("X-Api-Key", key)
		h.Set("Anthropic-Version", apiVersion)
	})
}

// readEvents reads the events of body, calling each with the next one,
// until the stream ends, an event's data is not the JSON of an event, an
// error event comes (a *streamError) or each returns false. It returns
// nil at message_stop, or at the end of the stream, which the caller
// tells apart by what it saw; io.ErrUnexpectedEOF (wrapped) when the stream
// ended inside an event.
func readEvents(body io.Reader, each func(event) bool) error {
	r := sse.NewReader(body, session.MaxStreamEvent)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		typ := ev.Type
		switch typ {
		case "ping":
			continue
		case "error":
			return &streamError{data: ev.Data}
		case "message_start", "message_delta", "message_stop", "content_block_start", "content_block_delta", "content_block_stop":
		case "":
			// A server that names the type only in the data.
		default:
			continue // a newer event type
		}
		var e event
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return fmt.Errorf("anthropic: reading the stream: a %s event whose data is not JSON: %w", typeName(typ), err)
		}
		if typ == "" {
			typ = e.Type
			if typ == "error" {
				return &streamError{data: ev.Data}
			}
		}
		e.Type = typ
		if !each(e) {
			return nil
		}
	}
}

func typeName(t string) string {
	if t == "" {
		return "nameless"
	}
	return t
}
