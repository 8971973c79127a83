package providertest_test

import (
	"context"
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

var openAIToolCompletion = providertest.OpenAICompletion{
	Content: "I'll read main.go — it's <short>.",
	ToolCalls: []providertest.OpenAIToolCall{
		{ID: "call_abc123", Name: "read", Arguments: `{"path":"main.go","limit":200}`},
		{ID: "call_def456", Name: "grep", Arguments: `{"pattern":"func main"}`},
	},
	Usage: providertest.OpenAIUsage{PromptTokens: 2095, CompletionTokens: 503, CachedTokens: 1024, ReasoningTokens: 64},
}

func checkToolCompletion(t *testing.T, c oaCompletion, withUsage bool) {
	t.Helper()
	require.Len(t, c.Choices, 1)
	ch := c.Choices[0]
	assert.Equal(t, "tool_calls", ch.FinishReason)
	assert.Equal(t, "I'll read main.go — it's <short>.", ch.Message.Content)
	require.Len(t, ch.Message.ToolCalls, 2)
	assert.Equal(t, "call_abc123", ch.Message.ToolCalls[0].ID)
	assert.Equal(t, "read", ch.Message.ToolCalls[0].Function.Name)
	assert.Equal(t, `{"path":"main.go","limit":200}`, ch.Message.ToolCalls[0].Function.Arguments)
	assert.Equal(t, "call_def456", ch.Message.ToolCalls[1].ID)
	assert.Equal(t, `{"pattern":"func main"}`, ch.Message.ToolCalls[1].Function.Arguments)
	if !withUsage {
		assert.Zero(t, c.Usage.TotalTokens)
		return
	}
	assert.Equal(t, int64(2095), c.Usage.PromptTokens)
	assert.Equal(t, int64(503), c.Usage.CompletionTokens)
	assert.Equal(t, int64(2598), c.Usage.TotalTokens)
	assert.Equal(t, int64(1024), c.Usage.PromptTokensDetails.CachedTokens)
	assert.Equal(t, int64(64), c.Usage.CompletionTokensDetails.ReasoningTokens)
}

func TestOpenAIStreamAccumulates(t *testing.T) {
	srv := providertest.NewOpenAI(t)
	srv.Push(openAIToolCompletion.Reply())
	acc, _, err := openAIStream(t.Context(), openAIClient(srv, "sk-first"), true)
	require.NoError(t, err)
	checkToolCompletion(t, acc, true)

	reqs := srv.Settled()
	require.Len(t, reqs, 1)
	r := reqs[0]
	assert.Equal(t, "POST", r.Method)
	assert.Equal(t, "/v1/chat/completions", r.Path)
	assert.Equal(t, "Bearer sk-first", r.Header.Get("Authorization"))
	assert.Equal(t, "sk-first", r.Key())
	assert.True(t, r.Stream)
	assert.Equal(t, providertest.OpenAIModel, r.Body["model"])
	assert.True(t, r.Complete)
}

// TestOpenAIStreamUsageOnlyWhenAsked: without stream_options.include_usage
// the API sends no usage at all, so an adapter must ask for it.
func TestOpenAIStreamUsageOnlyWhenAsked(t *testing.T) {
	srv := providertest.NewOpenAI(t)
	srv.Push(openAIToolCompletion.Reply(), openAIToolCompletion.Reply())
	c := openAIClient(srv, "k")
	without, n, err := openAIStream(t.Context(), c, false)
	require.NoError(t, err)
	checkToolCompletion(t, without, false)
	with, m, err := openAIStream(t.Context(), c, true)
	require.NoError(t, err)
	checkToolCompletion(t, with, true)
	assert.Equal(t, n+1, m, "the usage chunk is the one difference")
}

func TestOpenAIJSONCompletion(t *testing.T) {
	srv := providertest.NewOpenAI(t)
	srv.Push(openAIToolCompletion.Reply(), providertest.OpenAICompletion{Content: "Hello there"}.Reply())
	c := openAIClient(srv, "k")
	got, err := openAINew(t.Context(), c)
	require.NoError(t, err)
	checkToolCompletion(t, *got, true)
	got, err = openAINew(t.Context(), c)
	require.NoError(t, err)
	assert.Equal(t, "Hello there", got.Choices[0].Message.Content)
	assert.Equal(t, "stop", got.Choices[0].FinishReason)
	assert.Empty(t, got.Choices[0].Message.ToolCalls)
}

// TestOpenAIStreamWireFormat pins the bytes of a short stream, the example
// in docs/providers.md.
func TestOpenAIStreamWireFormat(t *testing.T) {
	c := providertest.OpenAICompletion{Content: "Hello there", Usage: providertest.OpenAIUsage{PromptTokens: 12, CompletionTokens: 3}}
	var b strings.Builder
	for _, e := range c.Events() {
		require.Empty(t, e.Name)
		b.WriteString("data: " + e.Data + "\n\n")
	}
	head := `"id":"chatcmpl-Fake000000000000000000000000","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_fake"`
	want := `data: {` + head + `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}

data: {` + head + `,"choices":[{"index":0,"delta":{"content":"Hello "},"logprobs":null,"finish_reason":null}]}

data: {` + head + `,"choices":[{"index":0,"delta":{"content":"there"},"logprobs":null,"finish_reason":null}]}

data: {` + head + `,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}

data: {` + head + `,"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}

data: [DONE]

`
	assert.Equal(t, want, b.String())
}

// TestOpenAIErrors sends each error to a client, once as the answer to a
// plain request and once to a streaming one: each comes with the status and
// the body's type, code, param and message.
func TestOpenAIErrors(t *testing.T) {
	cases := []struct {
		name             string
		reply            providertest.Reply
		status           int
		typ, code, param string
		message          string
		headers          map[string]string
	}{
		{name: "context length", reply: providertest.OpenAIContextLengthExceeded(128000, 130000), status: 400, typ: "invalid_request_error",
			code: "context_length_exceeded", param: "messages",
			message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages."},
		{name: "invalid key", reply: providertest.OpenAIInvalidAPIKey("sk-proj-abcdefghijkl1234"), status: 401, typ: "invalid_request_error",
			code: "invalid_api_key", message: "Incorrect API key provided: sk-*****************1234. You can find your API key at https://platform.openai.com/account/api-keys."},
		{name: "rate limit", reply: providertest.OpenAIRateLimit(1500 * time.Millisecond), status: 429, typ: "requests", code: "rate_limit_exceeded",
			headers: map[string]string{
				"retry-after":                    "2",
				"x-ratelimit-limit-requests":     "500",
				"x-ratelimit-remaining-requests": "0",
				"x-ratelimit-reset-requests":     "1.5s",
				"x-ratelimit-reset-tokens":       "150ms",
			}},
		{name: "insufficient quota", reply: providertest.OpenAIInsufficientQuota(), status: 429, typ: "insufficient_quota", code: "insufficient_quota",
			message: "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."},
		{name: "server error", reply: providertest.OpenAIServerError(), status: 500, typ: "server_error",
			message: "The server had an error while processing your request. Sorry about that!"},
		{name: "overloaded", reply: providertest.OpenAIOverloaded(), status: 503, typ: "server_error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := providertest.NewOpenAI(t)
			srv.Push(tc.reply, tc.reply)
			c := openAIClient(srv, "k")
			_, plainErr := openAINew(t.Context(), c)
			_, _, streamErr := openAIStream(t.Context(), c, true)
			for _, err := range []error{plainErr, streamErr} {
				var apiErr *apiError
				require.ErrorAs(t, err, &apiErr)
				assert.Equal(t, tc.status, apiErr.StatusCode)
				assert.Equal(t, tc.typ, apiErr.Type)
				assert.Equal(t, tc.code, apiErr.Code)
				assert.Equal(t, tc.param, apiErr.Param)
				if tc.message != "" {
					assert.Equal(t, tc.message, apiErr.Message)
				}
				assert.Equal(t, tc.reply.Header.Get("X-Request-Id"), apiErr.Header.Get("x-request-id"))
				for name, value := range tc.headers {
					assert.Equal(t, value, apiErr.Header.Get(name), name)
				}
			}
		})
	}
}

// TestOpenAIStreamErrorEvent: an error in a stream is a chunk holding
// "error" after the 200, not an error status.
func TestOpenAIStreamErrorEvent(t *testing.T) {
	srv := providertest.NewOpenAI(t)
	events := openAIToolCompletion.Events()[:3]
	srv.Push(providertest.Reply{Events: append(events, providertest.OpenAIErrorEvent("server_error", "", "The server had an error while processing your request."))})
	acc, n, err := openAIStream(t.Context(), openAIClient(srv, "k"), true)
	assert.Equal(t, 3, n)
	var streamErr *streamError
	require.ErrorAs(t, err, &streamErr)
	var apiErr *apiError
	assert.False(t, errors.As(err, &apiErr))
	assert.Contains(t, string(streamErr.Data), `"type":"server_error"`)
	assert.Equal(t, "I'll read ", acc.Choices[0].Message.Content)
}

// TestOpenAICutStream: a stream cut mid-way is an error of the client's
// read; cut cleanly (io.EOF), the client sees a stream that just ends,
// without a finish reason or [DONE].
func TestOpenAICutStream(t *testing.T) {
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
			srv := providertest.NewOpenAI(t)
			reply := openAIToolCompletion.Reply()
			reply.Break = &providertest.Break{After: 8, Err: tc.err}
			srv.Push(reply)
			acc, n, err := openAIStream(t.Context(), openAIClient(srv, "k"), true)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
			}
			assert.Equal(t, 8, n)
			require.Len(t, acc.Choices, 1)
			assert.Empty(t, acc.Choices[0].FinishReason)
			assert.False(t, srv.Settled()[0].Complete)
		})
	}
}

// TestOpenAIStallUntilDeadline runs in fake time: a stalled stream holds
// the client until the caller's deadline; the fake records the
// cancellation.
func TestOpenAIStallUntilDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewOpenAI(t)
		reply := openAIToolCompletion.Reply()
		reply.Break = &providertest.Break{After: 2, Stall: true}
		srv.Push(reply)
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
		defer cancel()
		_, n, err := openAIStream(ctx, openAIClient(srv, "k"), true)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 2, n)
		assert.Equal(t, 45*time.Second, time.Since(start))
		r := srv.Settled()[0]
		assert.True(t, r.Cancelled)
	})
}

// TestOpenAIRefusesLikeTheAPI: requests the API refuses before any model
// runs get its error and use up no reply.
func TestOpenAIRefusesLikeTheAPI(t *testing.T) {
	srv := providertest.NewOpenAI(t)
	srv.Push(providertest.OpenAICompletion{Content: "ok"}.Reply())
	post := func(auth, body string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), "POST", srv.BaseURL()+"chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
	status, body := post("", `{"model":"gpt-4o-mini","messages":[]}`)
	assert.Equal(t, 401, status)
	assert.Contains(t, body, "You didn't provide an API key.")
	status, body = post("Bearer k", `{"messages":[]}`)
	assert.Equal(t, 400, status)
	assert.Contains(t, body, `"message":"you must provide a model parameter","type":"invalid_request_error","param":null,"code":null`)
	status, body = post("Bearer k", `{"model":"gpt-4o-mini"}`)
	assert.Equal(t, 400, status)
	assert.Contains(t, body, `"param":"messages","code":"missing_required_parameter"`)
	status, body = post("Bearer k", `{"model":"gpt-4o-mini","messages":[],"stream_options":{"include_usage":true}}`)
	assert.Equal(t, 400, status, "stream_options without a stream")
	assert.Contains(t, body, `"message":"The 'stream_options' parameter is only allowed when 'stream' is enabled.","type":"invalid_request_error","param":"stream_options","code":null`)
	status, body = post("Bearer k", `{"model":`)
	assert.Equal(t, 400, status)
	assert.Contains(t, body, "We could not parse the JSON body of your request.")
	assert.Equal(t, 1, srv.Pending())
	status, body = post("Bearer k", `{"model":"gpt-4o-mini","messages":[]}`)
	assert.Equal(t, 200, status)
	assert.Len(t, srv.Settled(), 6)
	assert.Contains(t, body, `"content":"ok"`)
	assert.Equal(t, 0, srv.Pending())
}

// TestOpenAIKeys: the fake records each request's key.
func TestOpenAIKeys(t *testing.T) {
	srv := providertest.NewOpenAI(t)
	srv.Push(providertest.OpenAIInsufficientQuota(), providertest.OpenAICompletion{Content: "ok"}.Reply())
	_, err := openAINew(t.Context(), openAIClient(srv, "sk-first"))
	require.Error(t, err)
	_, err = openAINew(t.Context(), openAIClient(srv, "sk-second"))
	require.NoError(t, err)
	reqs := srv.Settled()
	assert.Equal(t, "sk-first", reqs[0].Key())
	assert.Equal(t, "sk-second", reqs[1].Key())
}

// TestRequestReceived: the fake notes when each request came, by the
// bubble's clock under synctest, so a test can check a retry's wait.
func TestRequestReceived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewOpenAI(t)
		srv.Push(providertest.OpenAICompletion{Content: "one"}.Reply(), providertest.OpenAICompletion{Content: "two"}.Reply())
		c := openAIClient(srv, "k")
		start := time.Now()
		_, err := openAINew(t.Context(), c)
		require.NoError(t, err)
		time.Sleep(1500 * time.Millisecond)
		_, err = openAINew(t.Context(), c)
		require.NoError(t, err)
		reqs := srv.Requests()
		require.Len(t, reqs, 2)
		assert.Equal(t, start, reqs[0].Received)
		assert.Equal(t, 1500*time.Millisecond, reqs[1].Received.Sub(reqs[0].Received))
	})
}
