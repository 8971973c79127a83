package providertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/internal/providertest"
)

// anthropicClient is the SDK's client pointed at srv, with key and without
// the SDK's own retries (the session owns retrying).
func anthropicClient(srv *providertest.Server, key string) *anthropic.Client {
	c := anthropic.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(key),
		option.WithBaseURL(srv.BaseURL()),
		option.WithHTTPClient(srv.Client()),
		option.WithMaxRetries(0),
	)
	return &c
}

func anthropicParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(providertest.AnthropicModel),
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is in main.go?"))},
	}
}

// anthropicStream reads a whole stream into one message, as an adapter
// does, and returns it with the stream's error and the events' types.
func anthropicStream(ctx context.Context, c *anthropic.Client) (anthropic.Message, []string, error) {
	stream := c.Messages.NewStreaming(ctx, anthropicParams())
	defer stream.Close()
	var msg anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			return msg, types, err
		}
	}
	return msg, types, stream.Err()
}

// richMessage has a block of each kind an agent meets, and usage with
// cache tokens.
var richMessage = providertest.AnthropicMessage{
	Content: []providertest.AnthropicBlock{
		providertest.AnthropicThinking("The user wants the file read first.", "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"),
		providertest.AnthropicText("I'll read main.go — it's <short>."),
		providertest.AnthropicToolUse("toolu_01A09q90qw90lq917835lq9", "read", map[string]any{"path": "main.go", "limit": 200}),
	},
	Usage: providertest.AnthropicUsage{InputTokens: 2095, OutputTokens: 503, CacheCreationInputTokens: 1200, CacheReadInputTokens: 800},
}

func checkRichMessage(t *testing.T, msg anthropic.Message) {
	t.Helper()
	require.Len(t, msg.Content, 3)
	assert.Equal(t, "thinking", msg.Content[0].Type)
	assert.Equal(t, "The user wants the file read first.", msg.Content[0].Thinking)
	assert.Equal(t, "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds", msg.Content[0].Signature)
	assert.Equal(t, "text", msg.Content[1].Type)
	assert.Equal(t, "I'll read main.go — it's <short>.", msg.Content[1].Text)
	tool := msg.Content[2].AsToolUse()
	assert.Equal(t, "tool_use", string(tool.Type))
	assert.Equal(t, "toolu_01A09q90qw90lq917835lq9", tool.ID)
	assert.Equal(t, "read", tool.Name)
	assert.JSONEq(t, `{"path":"main.go","limit":200}`, string(tool.Input))
	assert.Equal(t, anthropic.StopReasonToolUse, msg.StopReason)
	assert.Equal(t, int64(2095), msg.Usage.InputTokens)
	assert.Equal(t, int64(503), msg.Usage.OutputTokens)
	assert.Equal(t, int64(1200), msg.Usage.CacheCreationInputTokens)
	assert.Equal(t, int64(800), msg.Usage.CacheReadInputTokens)
}

func TestAnthropicStreamAccumulates(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	srv.Push(richMessage.Reply())
	msg, types, err := anthropicStream(t.Context(), anthropicClient(srv, "sk-ant-first"))
	require.NoError(t, err)
	checkRichMessage(t, msg)
	assert.Equal(t, "message_start", types[0])
	assert.Equal(t, []string{"message_delta", "message_stop"}, types[len(types)-2:])
	assert.Contains(t, types, "content_block_delta")

	reqs := srv.Settled()
	require.Len(t, reqs, 1)
	r := reqs[0]
	assert.Equal(t, "POST", r.Method)
	assert.Equal(t, "/v1/messages", r.Path)
	assert.Equal(t, "sk-ant-first", r.Key())
	assert.Equal(t, "Bearer sk-ant-first", r.Header.Get("Authorization"), "SDK v2 sends an API key as a bearer token")
	assert.NotEmpty(t, r.Header.Get("Anthropic-Version"))
	assert.True(t, r.Stream)
	assert.Equal(t, providertest.AnthropicModel, r.Body["model"])
	assert.True(t, r.Complete)
	assert.False(t, r.Cancelled)
	assert.Empty(t, r.Rejected)
}

func TestAnthropicJSONMessage(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	srv.Push(richMessage.Reply())
	msg, err := anthropicClient(srv, "sk-ant-first").Messages.New(t.Context(), anthropicParams())
	require.NoError(t, err)
	checkRichMessage(t, *msg)
	assert.False(t, srv.Settled()[0].Stream)
}

// TestAnthropicStreamWireFormat pins the bytes of a short stream, the
// example in docs/providers.md.
func TestAnthropicStreamWireFormat(t *testing.T) {
	m := providertest.AnthropicMessage{
		Content: []providertest.AnthropicBlock{providertest.AnthropicText("Hello there")},
		Usage:   providertest.AnthropicUsage{InputTokens: 12, OutputTokens: 6, CacheReadInputTokens: 4},
	}
	var b strings.Builder
	for _, e := range m.Events() {
		b.WriteString("event: " + e.Name + "\ndata: " + e.Data + "\n\n")
	}
	want := `event: message_start
data: {"type":"message_start","message":{"id":"msg_01FakeMessage000000000000","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":4,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type":"ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"there"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":6}}

event: message_stop
data: {"type":"message_stop"}

`
	assert.Equal(t, want, b.String())
}

func TestAnthropicStopReasonContextWindowExceeded(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	m := providertest.AnthropicMessage{
		Content:    []providertest.AnthropicBlock{providertest.AnthropicText("The summary so far is")},
		StopReason: "model_context_window_exceeded",
		Usage:      providertest.AnthropicUsage{InputTokens: 199000, OutputTokens: 1000},
	}
	srv.Push(m.Reply(), m.Reply())
	c := anthropicClient(srv, "k")
	msg, _, err := anthropicStream(t.Context(), c)
	require.NoError(t, err)
	assert.Equal(t, anthropic.StopReasonModelContextWindowExceeded, msg.StopReason)
	whole, err := c.Messages.New(t.Context(), anthropicParams())
	require.NoError(t, err)
	assert.Equal(t, anthropic.StopReasonModelContextWindowExceeded, whole.StopReason)
}

// TestAnthropicErrors sends each documented error to the SDK, once as the
// answer to a plain request and once to a streaming one: each becomes an
// *anthropic.Error with the status, the body's type and message, and the
// request id.
func TestAnthropicErrors(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		reply   providertest.Reply
		status  int
		typ     string
		message string
		code    string
		headers map[string]string
	}{
		{name: "prompt too long", reply: providertest.AnthropicPromptTooLong(213462, 200000), status: 400, typ: "invalid_request_error",
			message: "prompt is too long: 213462 tokens > 200000 maximum"},
		{name: "credit balance", reply: providertest.AnthropicCreditBalanceTooLow(), status: 400, typ: "invalid_request_error",
			message: "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."},
		{name: "authentication", reply: providertest.AnthropicError(401, "authentication_error", "invalid x-api-key"), status: 401,
			typ: "authentication_error", message: "invalid x-api-key"},
		{name: "permission", reply: providertest.AnthropicError(403, "permission_error", "Your API key does not have permission to use the specified resource."),
			status: 403, typ: "permission_error", message: "Your API key does not have permission to use the specified resource."},
		{name: "not found", reply: providertest.AnthropicError(404, "not_found_error", "model: claude-nonexistent"), status: 404,
			typ: "not_found_error", message: "model: claude-nonexistent"},
		{name: "request too large", reply: providertest.AnthropicError(413, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
			status: 413, typ: "request_too_large", message: "Request exceeds the maximum allowed number of bytes."},
		{name: "rate limit", reply: providertest.AnthropicRateLimit(20*time.Second, now), status: 429, typ: "rate_limit_error",
			headers: map[string]string{
				"retry-after":                             "20",
				"anthropic-ratelimit-requests-limit":      "50",
				"anthropic-ratelimit-requests-remaining":  "0",
				"anthropic-ratelimit-requests-reset":      "2026-03-01T12:00:20Z",
				"anthropic-ratelimit-input-tokens-reset":  "2026-03-01T12:00:20Z",
				"anthropic-ratelimit-output-tokens-limit": "20000",
				"anthropic-ratelimit-tokens-remaining":    "90000",
				"anthropic-ratelimit-output-tokens-reset": "2026-03-01T12:00:20Z",
				"anthropic-ratelimit-input-tokens-limit":  "80000",
			}},
		{name: "spend limit", reply: providertest.AnthropicSpendLimit(), status: 429, typ: "rate_limit_error", code: "enforced_spend_limit_reached"},
		{name: "api error", reply: providertest.AnthropicError(500, "api_error", "Internal server error"), status: 500, typ: "api_error",
			message: "Internal server error"},
		{name: "overloaded", reply: providertest.AnthropicOverloaded(), status: 529, typ: "overloaded_error", message: "Overloaded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := providertest.NewAnthropic(t)
			srv.Push(tc.reply, tc.reply)
			c := anthropicClient(srv, "k")
			_, plainErr := c.Messages.New(t.Context(), anthropicParams())
			_, _, streamErr := anthropicStream(t.Context(), c)
			for _, err := range []error{plainErr, streamErr} {
				var apiErr *anthropic.Error
				require.ErrorAs(t, err, &apiErr)
				assert.Equal(t, tc.status, apiErr.StatusCode)
				assert.Equal(t, anthropic.ErrorType(tc.typ), apiErr.Type())
				if tc.message != "" {
					assert.Equal(t, tc.message, apiErr.Message)
				}
				assert.Equal(t, tc.code, string(apiErr.ErrorCode()))
				assert.Equal(t, tc.reply.Header.Get("Request-Id"), apiErr.RequestID)
				assert.True(t, strings.HasPrefix(apiErr.RequestID, "req_"), apiErr.RequestID)
				var body struct {
					RequestID string `json:"request_id"`
				}
				require.NoError(t, json.Unmarshal([]byte(apiErr.RawJSON()), &body))
				assert.Equal(t, apiErr.RequestID, body.RequestID)
				for name, value := range tc.headers {
					assert.Equal(t, value, apiErr.Response.Header.Get(name), name)
				}
			}
		})
	}
}

// TestAnthropicStreamErrorEvent: an error after the 200 status comes as an
// error event; the SDK makes it an *anthropic.Error whose StatusCode is the
// stream's 200, so only its type tells an overload.
func TestAnthropicStreamErrorEvent(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	events := richMessage.Events()[:4]
	srv.Push(providertest.Reply{Events: append(events, providertest.AnthropicErrorEvent("overloaded_error", "Overloaded"))})
	msg, _, err := anthropicStream(t.Context(), anthropicClient(srv, "k"))
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusOK, apiErr.StatusCode)
	assert.Equal(t, anthropic.ErrorTypeOverloadedError, apiErr.Type())
	assert.Equal(t, "Overloaded", apiErr.Message)
	assert.NotEmpty(t, apiErr.RequestID)
	require.Len(t, msg.Content, 1)
	assert.Equal(t, "The ", msg.Content[0].Thinking)
}

// TestAnthropicCutStream: a stream cut mid-way is an error of the SDK's
// read, a connection reset by default; cut cleanly (io.EOF), the SDK sees a
// stream that just ends, without message_stop.
func TestAnthropicCutStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"reset", nil, syscall.ECONNRESET},
		{"unexpected EOF", io.ErrUnexpectedEOF, io.ErrUnexpectedEOF},
		{"clean EOF", io.EOF, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := providertest.NewAnthropic(t)
			reply := richMessage.Reply()
			reply.Break = &providertest.Break{After: 5, Err: tc.err}
			srv.Push(reply)
			msg, types, err := anthropicStream(t.Context(), anthropicClient(srv, "k"))
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
			}
			assert.Len(t, types, 4, "the ping is not an event of the SDK's stream")
			assert.NotContains(t, types, "message_stop")
			assert.Equal(t, "The user ", msg.Content[0].Thinking)
			r := srv.Settled()[0]
			assert.False(t, r.Complete)
			assert.False(t, r.Cancelled)
		})
	}
}

// TestAnthropicResetBeforeHeaders: a connection reset before any response
// is the SDK's error as the transport gave it, not an *anthropic.Error.
func TestAnthropicResetBeforeHeaders(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	reply := richMessage.Reply()
	reply.Break = &providertest.Break{NoHeaders: true}
	srv.Push(reply, reply)
	c := anthropicClient(srv, "k")
	_, err := c.Messages.New(t.Context(), anthropicParams())
	require.ErrorIs(t, err, syscall.ECONNRESET)
	var apiErr *anthropic.Error
	assert.False(t, errors.As(err, &apiErr))
	_, _, err = anthropicStream(t.Context(), c)
	require.ErrorIs(t, err, syscall.ECONNRESET)
}

// TestAnthropicCutBody: a JSON message cut part-way fails the plain call.
func TestAnthropicCutBody(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	reply := richMessage.Reply()
	reply.Break = &providertest.Break{After: 40}
	srv.Push(reply)
	_, err := anthropicClient(srv, "k").Messages.New(t.Context(), anthropicParams())
	require.ErrorIs(t, err, syscall.ECONNRESET)
}

// TestAnthropicStallUntilDeadline runs in fake time: a stream that stops
// sending holds the SDK until the caller's deadline, and the fake records
// the request as cancelled.
func TestAnthropicStallUntilDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		stalled := richMessage.Reply()
		stalled.Break = &providertest.Break{After: 3, Stall: true}
		silent := richMessage.Reply()
		silent.Break = &providertest.Break{NoHeaders: true, Stall: true}
		srv.Push(stalled, silent)
		c := anthropicClient(srv, "k")

		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		defer cancel()
		msg, types, err := anthropicStream(ctx, c)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 90*time.Second, time.Since(start))
		assert.Equal(t, []string{"message_start", "content_block_start"}, types)
		assert.Len(t, msg.Content, 1)

		ctx, abort := context.WithCancelCause(t.Context())
		go func() {
			time.Sleep(5 * time.Second)
			abort(errors.New("user pressed Esc"))
		}()
		_, _, err = anthropicStream(ctx, c)
		require.ErrorIs(t, err, context.Canceled)

		reqs := srv.Settled()
		require.Len(t, reqs, 2)
		for _, r := range reqs {
			assert.True(t, r.Cancelled)
			assert.False(t, r.Complete)
		}
	})
}

// TestAnthropicAbortMidStream: the client cancelling while events still
// flow is recorded as a cancelled request.
func TestAnthropicAbortMidStream(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	srv.Push(richMessage.Reply())
	ctx, cancel := context.WithCancel(t.Context())
	stream := anthropicClient(srv, "k").Messages.NewStreaming(ctx, anthropicParams())
	require.True(t, stream.Next())
	cancel()
	for stream.Next() {
	}
	require.ErrorIs(t, stream.Err(), context.Canceled)
	stream.Close()
	r := srv.Settled()[0]
	assert.True(t, r.Cancelled)
	assert.False(t, r.Complete)
}

// TestAnthropicKeys: the fake records the key of each request, so a test
// can check that a second key was used.
func TestAnthropicKeys(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	srv.Push(providertest.AnthropicSpendLimit(), richMessage.Reply())
	_, err := anthropicClient(srv, "sk-ant-first").Messages.New(t.Context(), anthropicParams())
	require.Error(t, err)
	_, err = anthropicClient(srv, "sk-ant-second").Messages.New(t.Context(), anthropicParams())
	require.NoError(t, err)
	reqs := srv.Settled()
	require.Len(t, reqs, 2)
	assert.Equal(t, "sk-ant-first", reqs[0].Key())
	assert.Equal(t, "sk-ant-second", reqs[1].Key())

	token := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithAuthToken("oauth-token"),
		option.WithBaseURL(srv.BaseURL()), option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
	srv.Push(richMessage.Reply())
	_, err = token.Messages.New(t.Context(), anthropicParams())
	require.NoError(t, err)
	assert.Equal(t, "oauth-token", srv.Settled()[2].Key())
}

// TestAnthropicRefusesLikeTheAPI: requests the API refuses before any model
// runs get its error and use up no reply.
func TestAnthropicRefusesLikeTheAPI(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	srv.Push(richMessage.Reply())
	post := func(header map[string]string, body string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), "POST", srv.BaseURL()+"v1/messages", strings.NewReader(body))
		require.NoError(t, err)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
	valid := `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[]}`
	headers := map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}

	status, body := post(map[string]string{"anthropic-version": "2023-06-01"}, valid)
	assert.Equal(t, 401, status)
	assert.Contains(t, body, `"type":"authentication_error","message":"x-api-key header is required"`)
	status, body = post(map[string]string{"x-api-key": "k"}, valid)
	assert.Equal(t, 400, status)
	assert.Contains(t, body, `anthropic-version: header is required`)
	status, body = post(headers, `{"model":"claude-sonnet-4-5","messages":[]}`)
	assert.Equal(t, 400, status)
	assert.Contains(t, body, `"type":"invalid_request_error","message":"max_tokens: Field required"`)
	status, body = post(headers, `not json`)
	assert.Equal(t, 400, status)
	assert.Contains(t, body, `not a JSON object`)

	assert.Equal(t, 1, srv.Pending(), "a refused request uses up no reply")
	status, _ = post(headers, valid)
	assert.Equal(t, 200, status)
	assert.Equal(t, 0, srv.Pending())
	reqs := srv.Settled()
	require.Len(t, reqs, 5)
	assert.Equal(t, "no API key", reqs[0].Rejected)
	assert.Nil(t, reqs[3].Body)
	assert.Equal(t, "not json", string(reqs[3].Raw))
	assert.Empty(t, reqs[4].Rejected)
}

// TestAnthropicScriptMistakes: a request to another route, or past the end
// of the script, fails the test that owns the fake, and still gets the
// API's error shape.
func TestAnthropicScriptMistakes(t *testing.T) {
	rec := &recorder{TB: t}
	srv := providertest.NewAnthropic(rec)
	c := anthropicClient(srv, "k")
	_, err := c.Messages.New(t.Context(), anthropicParams())
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 500, apiErr.StatusCode)
	assert.Equal(t, anthropic.ErrorTypeAPIError, apiErr.Type())

	_, err = c.Models.Get(t.Context(), "claude-sonnet-4-5", anthropic.ModelGetParams{})
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 404, apiErr.StatusCode)
	assert.Equal(t, anthropic.ErrorTypeNotFoundError, apiErr.Type())

	srv.Settled()
	reported := rec.reported()
	require.Len(t, reported, 2)
	assert.Contains(t, reported[0], "no reply left in the script")
	assert.Contains(t, reported[1], "no such route: this fake serves POST /v1/messages")
}
