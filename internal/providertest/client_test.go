package providertest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentfsm/agentfsm/internal/providertest"
	"github.com/agentfsm/agentfsm/internal/sse"
)

// apiClient is a client of the two APIs the fakes speak, over net/http and
// internal/sse as the adapters speak them, reading the answers into the
// documented shapes: what these tests check the fakes against.
type apiClient struct {
	anthropic bool
	base, key string
	bearer    bool // Anthropic: the key as an Authorization bearer token (an OAuth token), not x-api-key
	hc        *http.Client
}

func anthropicClient(srv *providertest.Server, key string) *apiClient {
	return &apiClient{anthropic: true, base: srv.BaseURL(), key: key, hc: srv.Client()}
}

func openAIClient(srv *providertest.Server, key string) *apiClient {
	return &apiClient{base: srv.BaseURL(), key: key, hc: srv.Client()}
}

// apiError is an error status's answer: the status, the headers, the body
// and what the body says (Anthropic's error.type, error.message,
// error.details.error_code and request_id; OpenAI's error.type, code,
// param and message). Its text is the status line only.
type apiError struct {
	StatusCode int
	Header     http.Header
	Body       []byte

	Type, Message, Code, Param, RequestID string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

func newAPIError(status int, header http.Header, body []byte) *apiError {
	e := &apiError{StatusCode: status, Header: header, Body: body, RequestID: header.Get("Request-Id")}
	var b struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Code    string `json:"code"`
			Param   string `json:"param"`
			Details struct {
				ErrorCode string `json:"error_code"`
			} `json:"details"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &b)
	e.Type, e.Message, e.Code, e.Param = b.Error.Type, b.Error.Message, b.Error.Code, b.Error.Param
	if b.Error.Details.ErrorCode != "" {
		e.Code = b.Error.Details.ErrorCode
	}
	return e
}

// streamError is an OpenAI-compatible error chunk after the 200: its
// event.
type streamError struct{ Data []byte }

func (e *streamError) Error() string { return "an error in the stream: " + string(e.Data) }

// do sends method path with body (JSON, when not nil) and returns the
// response, or an *apiError for an error status.
func (c *apiClient) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.base, "/")+"/"+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	switch {
	case !c.anthropic, c.bearer:
		req.Header.Set("Authorization", "Bearer "+c.key)
	default:
		req.Header.Set("X-Api-Key", c.key)
	}
	if c.anthropic {
		req.Header.Set("Anthropic-Version", "2023-06-01")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		return nil, newAPIError(resp.StatusCode, resp.Header, b)
	}
	return resp, nil
}

// ctxErr is err, wrapping ctx's error too when ctx ended: net/http's error
// holds the context's cause, which a caller's cause may replace.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return err
}

// getJSON decodes the JSON answer to method path with body into out.
func (c *apiClient) getJSON(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// anthMessage is a Messages API message.
type anthMessage struct {
	Content    []anthBlock `json:"content"`
	StopReason string      `json:"stop_reason"`
	Usage      struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`
}

type anthBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

func anthropicParams(stream bool) map[string]any {
	return map[string]any{"model": providertest.AnthropicModel, "max_tokens": 1024, "stream": stream,
		"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "What is in main.go?"}}}}}
}

// anthropicNew makes a plain (not streamed) call.
func anthropicNew(ctx context.Context, c *apiClient) (*anthMessage, error) {
	var m anthMessage
	if err := c.getJSON(ctx, http.MethodPost, "v1/messages", anthropicParams(false), &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// anthropicStream reads a whole stream into one message, as an adapter
// does, and returns it with the stream's error and the events' types
// (pings left out).
func anthropicStream(ctx context.Context, c *apiClient) (anthMessage, []string, error) {
	return anthropicStreamEach(ctx, c, nil)
}

// anthropicStreamEach is anthropicStream calling each, when not nil, after
// each event.
func anthropicStreamEach(ctx context.Context, c *apiClient, each func(typ string)) (anthMessage, []string, error) {
	var msg anthMessage
	var types []string
	resp, err := c.do(ctx, http.MethodPost, "v1/messages", anthropicParams(true))
	if err != nil {
		return msg, nil, err
	}
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body, 8<<20)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return msg, types, nil
		}
		if err != nil {
			return msg, types, ctxErr(ctx, err)
		}
		switch ev.Type {
		case "ping":
			continue
		case "error":
			return msg, types, newAPIError(resp.StatusCode, resp.Header, ev.Data)
		}
		var e struct {
			Message      anthMessage `json:"message"`
			Index        int         `json:"index"`
			ContentBlock anthBlock   `json:"content_block"`
			Delta        struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				Thinking    string `json:"thinking"`
				Signature   string `json:"signature"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
			Usage struct {
				OutputTokens int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return msg, types, err
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "message_start":
			msg = e.Message
		case "content_block_start":
			msg.Content = append(msg.Content, e.ContentBlock)
		case "content_block_delta":
			if e.Index >= len(msg.Content) {
				return msg, types, fmt.Errorf("a delta for block %d of %d", e.Index, len(msg.Content))
			}
			b := &msg.Content[e.Index]
			switch e.Delta.Type {
			case "text_delta":
				b.Text += e.Delta.Text
			case "thinking_delta":
				b.Thinking += e.Delta.Thinking
			case "signature_delta":
				b.Signature += e.Delta.Signature
			case "input_json_delta":
				if string(b.Input) == "{}" {
					b.Input = nil
				}
				b.Input = append(b.Input, e.Delta.PartialJSON...)
			}
		case "message_delta":
			msg.StopReason = e.Delta.StopReason
			msg.Usage.OutputTokens = e.Usage.OutputTokens
		}
		if each != nil {
			each(ev.Type)
			// A caller that cancels stops reading here, as a client whose
			// read would fail does: events already buffered must not let
			// the stream end as if it was never cancelled.
			if err := ctx.Err(); err != nil {
				return msg, types, err
			}
		}
	}
}

// oaCompletion is a chat completion.
type oaCompletion struct {
	Choices []oaChoice `json:"choices"`
	Usage   struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		TotalTokens         int64 `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

type oaChoice struct {
	Index        int    `json:"index"`
	FinishReason string `json:"finish_reason"`
	Message      struct {
		Content   string       `json:"content"`
		ToolCalls []oaToolCall `json:"tool_calls"`
	} `json:"message"`
}

type oaToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func openAIParams(stream, includeUsage bool) map[string]any {
	p := map[string]any{"model": providertest.OpenAIModel,
		"messages": []any{map[string]any{"role": "user", "content": "What is in main.go?"}}}
	if stream {
		p["stream"] = true
	}
	if includeUsage {
		p["stream_options"] = map[string]any{"include_usage": true}
	}
	return p
}

// openAINew makes a plain (not streamed) call.
func openAINew(ctx context.Context, c *apiClient) (*oaCompletion, error) {
	var out oaCompletion
	if err := c.getJSON(ctx, http.MethodPost, "chat/completions", openAIParams(false, false), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// openAIStream reads a whole stream into one completion, as an adapter
// does, and returns it with the stream's error and the number of chunks.
func openAIStream(ctx context.Context, c *apiClient, includeUsage bool) (oaCompletion, int, error) {
	var acc oaCompletion
	n := 0
	resp, err := c.do(ctx, http.MethodPost, "chat/completions", openAIParams(true, includeUsage))
	if err != nil {
		return acc, 0, err
	}
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body, 8<<20)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return acc, n, nil
		}
		if err != nil {
			return acc, n, ctxErr(ctx, err)
		}
		if bytes.Equal(ev.Data, []byte("[DONE]")) {
			return acc, n, nil // what follows is not read
		}
		var chunk struct {
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content   string       `json:"content"`
					ToolCalls []oaToolCall `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *json.RawMessage `json:"usage"`
			Error json.RawMessage  `json:"error"`
		}
		if err := json.Unmarshal(ev.Data, &chunk); err != nil {
			return acc, n, err
		}
		if len(chunk.Error) > 0 {
			return acc, n, &streamError{Data: ev.Data}
		}
		n++
		if chunk.Usage != nil && string(*chunk.Usage) != "null" {
			if err := json.Unmarshal(*chunk.Usage, &acc.Usage); err != nil {
				return acc, n, err
			}
		}
		for _, ch := range chunk.Choices {
			for len(acc.Choices) <= ch.Index {
				acc.Choices = append(acc.Choices, oaChoice{Index: len(acc.Choices)})
			}
			a := &acc.Choices[ch.Index]
			a.Message.Content += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				for len(a.Message.ToolCalls) <= tc.Index {
					a.Message.ToolCalls = append(a.Message.ToolCalls, oaToolCall{Index: len(a.Message.ToolCalls)})
				}
				t := &a.Message.ToolCalls[tc.Index]
				if tc.ID != "" {
					t.ID = tc.ID
				}
				t.Function.Name += tc.Function.Name
				t.Function.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				a.FinishReason = *ch.FinishReason
			}
		}
	}
}
