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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/internal/providertest"
)

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

func checkRichMessage(t *testing.T, msg anthMessage) {
	t.Helper()
	require.Len(t, msg.Content, 3)
	assert.Equal(t, "thinking", msg.Content[0].Type)
	assert.Equal(t, "The user wants the file read first.", msg.Content[0].Thinking)
	assert.Equal(t, "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds", msg.Content[0].Signature)
	assert.Equal(t, "text", msg.Content[1].Type)
	assert.Equal(t, "I'll read main.go — it's <short>.", msg.Content[1].Text)
	tool := msg.Content[2]
	assert.Equal(t, "tool_use", tool.Type)
	assert.Equal(t, "toolu_01A09q90qw90lq917835lq9", tool.ID)
	assert.Equal(t, "read", tool.Name)
	assert.JSONEq(t, `{"path":"main.go","limit":200}`, string(tool.Input))
	assert.Equal(t, "tool_use", msg.StopReason)
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
	assert.Equal(t, "sk-ant-first", r.Header.Get("X-Api-Key"))
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
	msg, err := anthropicNew(t.Context(), anthropicClient(srv, "sk-ant-first"))
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
	assert.Equal(t, "model_context_window_exceeded", msg.StopReason)
	whole, err := anthropicNew(t.Context(), c)
	require.NoError(t, err)
	assert.Equal(t, "model_context_window_exceeded", whole.StopReason)
}

// TestAnthropicErrors sends each documented error to a client, once as the
// answer to a plain request and once to a streaming one: each comes with
// the status, the body's type and message, and the request id.
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
			_, plainErr := anthropicNew(t.Context(), c)
			_, _, streamErr := anthropicStream(t.Context(), c)
			for _, err := range []error{plainErr, streamErr} {
				var apiErr *apiError
				require.ErrorAs(t, err, &apiErr)
				assert.Equal(t, tc.status, apiErr.StatusCode)
				assert.Equal(t, tc.typ, apiErr.Type)
				if tc.message != "" {
					assert.Equal(t, tc.message, apiErr.Message)
				}
				assert.Equal(t, tc.code, apiErr.Code)
				assert.Equal(t, tc.reply.Header.Get("Request-Id"), apiErr.RequestID)
				assert.True(t, strings.HasPrefix(apiErr.RequestID, "req_"), apiErr.RequestID)
				var body struct {
					RequestID string `json:"request_id"`
				}
				require.NoError(t, json.Unmarshal(apiErr.Body, &body))
				assert.Equal(t, apiErr.RequestID, body.RequestID)
				for name, value := range tc.headers {
					assert.Equal(t, value, apiErr.Header.Get(name), name)
				}
			}
		})
	}
}

// TestAnthropicStreamErrorEvent: an error after the 200 status comes as an
// error event: the stream's status is 200, so only its type tells an
// overload.
func TestAnthropicStreamErrorEvent(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	events := richMessage.Events()[:4]
	srv.Push(providertest.Reply{Events: append(events, providertest.AnthropicErrorEvent("overloaded_error", "Overloaded"))})
	msg, _, err := anthropicStream(t.Context(), anthropicClient(srv, "k"))
	var apiErr *apiError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusOK, apiErr.StatusCode)
	assert.Equal(t, "overloaded_error", apiErr.Type)
	assert.Equal(t, "Overloaded", apiErr.Message)
	assert.NotEmpty(t, apiErr.RequestID)
	require.Len(t, msg.Content, 1)
	assert.Equal(t, "The ", msg.Content[0].Thinking)
}

// TestAnthropicCutStream: a stream cut mid-way is an error of the client's
// read, a connection reset by default; cut cleanly (io.EOF), the client
// sees a stream that just ends, without message_stop.
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
			assert.Len(t, types, 4, "the ping is not counted")
			assert.NotContains(t, types, "message_stop")
			assert.Equal(t, "The user ", msg.Content[0].Thinking)
			r := srv.Settled()[0]
			assert.False(t, r.Complete)
			assert.False(t, r.Cancelled)
		})
	}
}

// TestAnthropicResetBeforeHeaders: a connection reset before any response
// is the error the transport gave, not an *apiError.
func TestAnthropicResetBeforeHeaders(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	reply := richMessage.Reply()
	reply.Break = &providertest.Break{NoHeaders: true}
	srv.Push(reply, reply)
	c := anthropicClient(srv, "k")
	_, err := anthropicNew(t.Context(), c)
	require.ErrorIs(t, err, syscall.ECONNRESET)
	var apiErr *apiError
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
	_, err := anthropicNew(t.Context(), anthropicClient(srv, "k"))
	require.ErrorIs(t, err, syscall.ECONNRESET)
}

// TestAnthropicStallUntilDeadline runs in fake time: a stream that stops
// sending holds the client until the caller's deadline, and the fake records
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
	_, _, err := anthropicStreamEach(ctx, anthropicClient(srv, "k"), func(string) { cancel() })
	require.ErrorIs(t, err, context.Canceled)
	r := srv.Settled()[0]
	assert.True(t, r.Cancelled)
	assert.False(t, r.Complete)
}

// TestAnthropicKeys: the fake records the key of each request, so a test
// can check that a second key was used.
func TestAnthropicKeys(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	srv.Push(providertest.AnthropicSpendLimit(), richMessage.Reply())
	_, err := anthropicNew(t.Context(), anthropicClient(srv, "sk-ant-first"))
	require.Error(t, err)
	_, err = anthropicNew(t.Context(), anthropicClient(srv, "sk-ant-second"))
	require.NoError(t, err)
	reqs := srv.Settled()
	require.Len(t, reqs, 2)
	assert.Equal(t, "sk-ant-first", reqs[0].Key())
	assert.Equal(t, "sk-ant-second", reqs[1].Key())

	token := anthropicClient(srv, "oauth-token")
	token.bearer = true
	srv.Push(richMessage.Reply())
	_, err = anthropicNew(t.Context(), token)
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
	_, err := anthropicNew(t.Context(), c)
	var apiErr *apiError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 500, apiErr.StatusCode)
	assert.Equal(t, "api_error", apiErr.Type)

	_, err = c.do(t.Context(), http.MethodGet, "v1/models/claude-sonnet-4-5", nil)
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 404, apiErr.StatusCode)
	assert.Equal(t, "not_found_error", apiErr.Type)

	srv.Settled()
	reported := rec.reported()
	require.Len(t, reported, 2)
	assert.Contains(t, reported[0], "no reply left in the script")
	assert.Contains(t, reported[1], "no such route: this fake serves POST /v1/messages")
}
