package openai_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/providertest"
	"github.com/agentfsm/agentfsm/providers/openai"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// rawRun runs an agent whose every request handler answers, once, outside
// a session, and returns its last message.
func rawRun(t *testing.T, ctx context.Context, opts openai.Options, handler http.HandlerFunc) transcript.Message {
	t.Helper()
	if opts.BaseURL == "" {
		opts.BaseURL = "http://openai.test/v1/"
	}
	opts.Model, opts.HTTPClient, opts.Secrets = "gpt-4o", providertest.Client(handler), credentials.EnvSecrets{Lookup: lookup}
	var evs []events.Event
	require.NoError(t, openai.New(opts).Run(ctx, session.RunRequest{Context: []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hi")}}},
		func(ev events.Event) { evs = append(evs, ev) }))
	ms := evs[len(evs)-1].(events.AgentEnd).Messages
	return ms[len(ms)-1]
}

// The request is the documented one: POST {base}/chat/completions with
// the key as a bearer token, the organisation and project of the
// environment, a streamed body asking for the usage; the base URL comes
// from OPENAI_BASE_URL when Options has none.
func TestRequestOnTheWire(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://from-env.test/v1")
	t.Setenv("OPENAI_ORG_ID", "org-1")
	t.Setenv("OPENAI_PROJECT_ID", "proj-2")
	synctest.Test(t, func(t *testing.T) {
		var got *http.Request
		var body string
		a := openai.New(openai.Options{Model: "gpt-4o", MaxTokens: 55, Secrets: credentials.EnvSecrets{Lookup: lookup},
			HTTPClient: providertest.Client(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r
				b, _ := io.ReadAll(r.Body)
				body = string(b)
				_, _ = w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
			}))})
		require.NoError(t, a.Run(context.Background(), session.RunRequest{Context: []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hi")}}},
			func(events.Event) {}))
		require.NotNil(t, got)
		assert.Equal(t, http.MethodPost, got.Method)
		assert.Equal(t, "http://from-env.test/v1/chat/completions", got.URL.String())
		assert.Equal(t, "Bearer "+secrets["OPENAI_API_KEY"], got.Header.Get("Authorization"))
		assert.Equal(t, "org-1", got.Header.Get("OpenAI-Organization"))
		assert.Equal(t, "proj-2", got.Header.Get("OpenAI-Project"))
		assert.Equal(t, "application/json", got.Header.Get("Content-Type"))
		assert.JSONEq(t, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":55,"stream":true,"stream_options":{"include_usage":true}}`, body)
	})
}

// A stream with what servers add to the documented chunks: comments,
// CRLF, a chunk split over two data lines, nulls, events of another type,
// "data:[DONE]" without its space and what follows it. The answer is read
// whole and the rest after [DONE] ignored.
func TestStreamVariants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := rawRun(t, context.Background(), openai.Options{}, func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(strings.Join([]string{
				": OPENROUTER PROCESSING\r\n\r\n",
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"reasoning\":\"think\"},\"finish_reason\":null}]}\r\n\r\n",
				"data: {\"choices\":[{\"index\":0,\n",
				"data: \"delta\":{\"content\":\"Hel\"}}]}\n\n",
				"event: ping\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"NOT THIS\"}}]}\n\n",
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
				"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2,\"total_tokens\":12}}\n\n",
				"data:[DONE]\n\n",
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"AFTER\"}}]}\n\n",
			}, "")))
		})
		assert.Equal(t, transcript.StopReasonStop, m.StopReason, m.ErrorMessage)
		assert.Equal(t, []transcript.Block{{Type: transcript.BlockThinking, Thinking: "think", ThinkingSignature: "reasoning"}, transcript.TextBlock("Hello")}, m.Content)
		assert.Equal(t, &transcript.Usage{Input: 10, Output: 2, TotalTokens: 12}, m.Usage)
	})
}

// Failures the SDK used to tell apart, each with what the classifier
// reads: an error body that is not JSON, a compatible server's
// {"error":"…"}, an error event (typed or in a chunk), a chunk that is
// not JSON, a stream cut inside an event.
func TestFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		status                 int
		body, wantMsg, wantErr string
		wantStatus             int
	}{
		"HTML error page": {502, "<html>Bad Gateway</html>", "502 <html>Bad Gateway</html>",
			`openai: POST "http://openai.test/v1/chat/completions": 502 Bad Gateway (x-request-id: req_x)`, 502},
		"Ollama's error": {404, `{"error":"model \"llama9\" not found, try pulling it first"}`, `404 model "llama9" not found, try pulling it first`,
			`openai: POST "http://openai.test/v1/chat/completions": 404 Not Found (x-request-id: req_x)`, 404},
		"error chunk": {200, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"error\":{\"message\":\"Overloaded\",\"type\":\"server_error\",\"code\":\"overloaded\"}}\n\n",
			"overloaded: Overloaded", "openai: an error event in the stream", 0},
		"typed error event": {200, "event: error\ndata: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n",
			"server_error: boom", "openai: an error event in the stream", 0},
		"chunk not JSON":      {200, "data: {oops\n\n", "openai: reading the stream: a chunk that is not JSON", "", 0},
		"cut inside an event": {200, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"choi", "unexpected EOF", "", 0},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := rawRun(t, context.Background(), openai.Options{}, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("X-Request-Id", "req_x")
					w.WriteHeader(tc.status)
					_, _ = w.Write([]byte(tc.body))
				})
				assert.Equal(t, transcript.StopReasonError, m.StopReason)
				assert.Contains(t, m.ErrorMessage, tc.wantMsg)
				assert.Equal(t, tc.wantStatus, m.HTTPStatus)
				if tc.wantErr != "" {
					assert.Equal(t, tc.wantErr, m.Err.Error())
				}
				assert.False(t, providertest.HoldsHTTP(m.Err))
			})
		})
	}
}

// A call cancelled while the stream is in flight returns at once with
// the text so far, aborted, and leaves no goroutine (TestMain's goleak).
func TestCancelMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		m := rawRun(t, ctx, openai.Options{}, func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par\"}}]}\n\n"))
			w.(http.Flusher).Flush()
			cancel()
			<-r.Context().Done()
		})
		assert.Equal(t, transcript.StopReasonAborted, m.StopReason)
		assert.Equal(t, []transcript.Block{transcript.TextBlock("par")}, m.Content)
		synctest.Wait()
	})
}
