package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/agentfsm/agentfsm/internal/apicall"
	"github.com/agentfsm/agentfsm/internal/sse"
	"github.com/agentfsm/agentfsm/session"
)

// Chat Completions as this package speaks it over net/http: the request
// body of a streamed call, its messages and the chunks of its answer
// (docs/providers.md, "OpenAI").

// DefaultBaseURL is the API's base URL when Options.BaseURL is empty and
// the environment has no OPENAI_BASE_URL.
const DefaultBaseURL = "https://api.openai.com/v1/"

// request is the body of POST /chat/completions.
type request struct {
	Model               string         `json:"model"`
	Messages            []messageParam `json:"messages"`
	Tools               []toolParam    `json:"tools,omitempty"`
	MaxCompletionTokens int64          `json:"max_completion_tokens,omitempty"`
	Stream              bool           `json:"stream"`
	StreamOptions       streamOptions  `json:"stream_options"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// messageParam is a message of the request. Content is a string, or a
// list of parts (textPart, imagePart) for a user message with images;
// an assistant message may have none. Reasoning is sent in the field its
// name says (ReasoningField), when set.
type messageParam struct {
	Role           string
	Content        any
	ToolCalls      []toolCallParam
	ToolCallID     string
	ReasoningField string
	Reasoning      string
}

// MarshalJSON writes the message with only the fields it has.
func (m messageParam) MarshalJSON() ([]byte, error) {
	out := map[string]any{"role": m.Role}
	if m.Content != nil {
		out["content"] = m.Content
	}
	if len(m.ToolCalls) > 0 {
		out["tool_calls"] = m.ToolCalls
	}
	if m.ToolCallID != "" {
		out["tool_call_id"] = m.ToolCallID
	}
	if m.ReasoningField != "" {
		out[m.ReasoningField] = m.Reasoning
	}
	return json.Marshal(out)
}

type textPart struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

type imagePart struct {
	Type     string   `json:"type"` // "image_url"
	ImageURL imageURL `json:"image_url"`
}

type imageURL struct {
	URL string `json:"url"`
}

type toolCallParam struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type toolParam struct {
	Type     string      `json:"type"` // "function"
	Function functionDef `json:"function"`
}

type functionDef struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters"`
}

// chunk is one chunk of a streamed answer.
type chunk struct {
	Choices []chunkChoice   `json:"choices"`
	Usage   *usageWire      `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type chunkChoice struct {
	Index        int64      `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Content          *string         `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	Index    int64  `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type usageWire struct {
	PromptTokens        *int64 `json:"prompt_tokens"`
	CompletionTokens    int64  `json:"completion_tokens"`
	TotalTokens         int64  `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
}

// streamError is a chunk of the stream that holds an error, as
// compatible servers send one after their 200: data is the chunk.
type streamError struct{ data []byte }

func (e *streamError) Error() string { return "openai: an error event in the stream" }

// endpoint is the chat completions URL of base: Options.BaseURL, else
// OPENAI_BASE_URL, else DefaultBaseURL.
func endpoint(base string) (string, error) {
	if base == "" {
		base = os.Getenv("OPENAI_BASE_URL")
	}
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.JoinPath(base, "chat/completions")
	if err != nil {
		return "", api.BaseURLError(base, err)
	}
	return u, nil
}

// api is how the call is made over HTTP: the key in Authorization, the
// request's id in x-request-id.
var api = apicall.API{Name: "openai", Keys: []string{"Authorization"}, RequestID: "X-Request-Id", RequestIDLabel: "x-request-id"}

// post sends the streamed request body to the chat completions endpoint
// of base with key, with the OpenAI-Organization and OpenAI-Project
// headers when OPENAI_ORG_ID and OPENAI_PROJECT_ID are set, and returns
// the response, apicall's error for an error status or a document, or
// the transport's error. The caller closes the body.
func post(ctx context.Context, client *http.Client, base, key string, body []byte) (*http.Response, error) {
	u, err := endpoint(base)
	if err != nil {
		return nil, err
	}
	return api.Post(ctx, client, base, u, body, func(h http.Header) {
		h.Set("Authorization", "Bearer "+key)
		if v := os.Getenv("OPENAI_ORG_ID"); v != "" {
			h.Set("OpenAI-Organization", v)
		}
		if v := os.Getenv("OPENAI_PROJECT_ID"); v != "" {
			h.Set("OpenAI-Project", v)
		}
	})
}

// readChunks reads the chunks of body, calling each with the next one,
// until "data: [DONE]", the end of the stream, a chunk that is not JSON, a
// chunk holding an error (a *streamError) or each returning false. It
// returns nil at [DONE] or a clean end; an error wrapping
// io.ErrUnexpectedEOF when the stream ended inside an event.
func readChunks(body io.Reader, each func(chunk) bool) error {
	r := sse.NewReader(body, session.MaxStreamEvent)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		data := bytes.TrimSpace(ev.Data)
		if bytes.HasPrefix(data, []byte("[DONE]")) {
			return nil
		}
		switch ev.Type {
		case "", "message":
		case "error":
			return &streamError{data: ev.Data}
		default:
			continue // an event of another kind than the chunks
		}
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			return fmt.Errorf("openai: reading the stream: a chunk that is not JSON: %w", err)
		}
		if len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null")) {
			return &streamError{data: ev.Data}
		}
		if !each(c) {
			return nil
		}
	}
}
