package anthropic_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/providertest"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/providers/anthropic"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// rawAgent is an agent whose every request handler answers.
func rawAgent(handler http.HandlerFunc) *anthropic.Agent {
	return anthropic.New(anthropic.Options{BaseURL: "http://anthropic.test", HTTPClient: providertest.Client(handler),
		Secrets: credentials.EnvSecrets{Lookup: lookup}})
}

// The request is the documented one: POST /v1/messages with the key in
// x-api-key, anthropic-version 2023-06-01 and a streamed JSON body.
func TestRequestOnTheWire(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	srv.Push(text("hi"))
	a := anthropic.New(anthropic.Options{BaseURL: srv.BaseURL(), HTTPClient: srv.Client(), Secrets: credentials.EnvSecrets{Lookup: lookup},
		System: "be brief", MaxTokens: 77})
	_, err := run(t, a, []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hello")}})
	require.NoError(t, err)
	r := srv.Settled()[0]
	assert.Equal(t, http.MethodPost, r.Method)
	assert.Equal(t, "/v1/messages", r.Path)
	assert.Equal(t, keyA, r.Header.Get("X-Api-Key"))
	assert.Equal(t, "2023-06-01", r.Header.Get("Anthropic-Version"))
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	assert.Empty(t, r.Header.Get("Authorization"))
	assert.Equal(t, true, r.Body["stream"])
	assert.EqualValues(t, 77, r.Body["max_tokens"])
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "be brief"}}, r.Body["system"])
	assert.NotContains(t, r.Body, "tools")
}

// A stream with what a server may add to the documented events: comments,
// CRLF line ends, pings, a data line split in two, an event type this
// package does not know, an event named only in its data, a signature
// delta. The answer is read whole.
func TestStreamVariants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := rawAgent(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(strings.Join([]string{
				": hello\r\n",
				"event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\r\n\r\n",
				"event: ping\ndata: {\"type\":\"ping\"}\n\n",
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\n",
				"data: \"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n",
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"sig\"}}\n\n",
				"event: something_new\ndata: {\"type\":\"something_new\"}\n\n",
				"data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi \"}}\n\n",
				": keep-alive\n\n",
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"there\"}}\n\n",
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9,\"cache_read_input_tokens\":3}}\n\n",
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			}, "")))
		})
		s := newSession(t, a, fastConfig())
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		m := s.Messages()[1]
		assert.Equal(t, transcript.StopReasonStop, m.StopReason)
		assert.Equal(t, []transcript.Block{{Type: transcript.BlockThinking, Thinking: "hmm", ThinkingSignature: "sig"}, transcript.TextBlock("Hi there")}, m.Content)
		assert.Equal(t, &transcript.Usage{Input: 5, Output: 9, CacheRead: 3, TotalTokens: 17}, m.Usage)
	})
}

// An error body that is not JSON (a proxy's HTML page) is the message's
// text, its status the status, and it is retried as a server error.
func TestErrorBodyNotJSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		a := rawAgent(func(w http.ResponseWriter, r *http.Request) {
			calls++
			if calls == 1 {
				w.Header().Set("Content-Type", "text/html")
				w.Header().Set("Request-Id", "req_html")
				w.WriteHeader(http.StatusBadGateway)
				_, _ = w.Write([]byte("<html><body>502 Bad Gateway</body></html>"))
				return
			}
			_, _ = w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[]}}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
		})
		s := newSession(t, a, fastConfig())
		rec := watch(s)
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		failed := rec.ends()[0]
		assert.Equal(t, 502, failed.HTTPStatus)
		assert.Equal(t, "502 <html><body>502 Bad Gateway</body></html>", failed.ErrorMessage)
		assert.Equal(t, "req_html", failed.Headers["request-id"])
		assert.Equal(t, `anthropic: POST "http://anthropic.test/v1/messages": 502 Bad Gateway (Request-ID: req_html)`, failed.Err.Error())
		assert.Equal(t, 1, count[events.AutoRetryStart](rec.all()))
	})
}

// An event whose data is not JSON, or that names a block out of order,
// fails the call with an error naming it, which the session does not
// take for an answer.
func TestMalformedEvents(t *testing.T) {
	for name, tc := range map[string]struct{ stream, want string }{
		"data not JSON": {"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[]}}\n\nevent: content_block_delta\ndata: {oops\n\n",
			"a content_block_delta event whose data is not JSON"},
		"delta before its block": {"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[]}}\n\nevent: content_block_delta\ndata: {\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n",
			"a text_delta for content block 3, of 0 started"},
		"block out of order": {"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[]}}\n\nevent: content_block_start\ndata: {\"index\":2,\"content_block\":{\"type\":\"text\"}}\n\n",
			"content block 2 started after 0"},
		"message_start without message": {"event: message_start\ndata: {}\n\n", "a message_start without its message"},
		"error event not JSON":          {"event: error\ndata: upstream exploded\n\n", "upstream exploded"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := rawAgent(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(tc.stream)) })
				cfg := fastConfig()
				cfg.Retry.MaxRetries = 0
				s := newSession(t, a, cfg)
				rec := watch(s)
				require.ErrorIs(t, s.Prompt(context.Background(), "hi"), policy.ErrProvider)
				failed := rec.ends()[0]
				assert.Equal(t, transcript.StopReasonError, failed.StopReason)
				assert.Contains(t, failed.ErrorMessage, tc.want)
			})
		})
	}
}

// A call cancelled while the stream is in flight returns at once, the
// request's body closed and no goroutine left (TestMain's goleak).
func TestCancelMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		a := rawAgent(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[]}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"par\"}}\n\n"))
			w.(http.Flusher).Flush()
			cancel()
			<-r.Context().Done()
		})
		evs, err := func() ([]events.Event, error) {
			var evs []events.Event
			err := a.Run(ctx, session.RunRequest{Context: []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hi")}}, Model: a.Model()},
				func(e events.Event) { evs = append(evs, e) })
			return evs, err
		}()
		require.NoError(t, err)
		end := evs[len(evs)-1].(events.AgentEnd).Messages[0]
		assert.Equal(t, transcript.StopReasonAborted, end.StopReason)
		assert.Equal(t, []transcript.Block{transcript.TextBlock("par")}, end.Content)
		synctest.Wait()
	})
}

// A redirect to another host does not carry the key along (Go's client
// drops Authorization there, not x-api-key); one on the same host does, and
// the embedder's own CheckRedirect still decides.
func TestRedirectElsewhereDropsTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		keys := map[string]string{}
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			keys[r.Host+r.URL.Path] = r.Header.Get("X-Api-Key")
			switch r.Host + r.URL.Path {
			case "anthropic.test/v1/messages":
				http.Redirect(w, r, "http://anthropic.test/moved", http.StatusTemporaryRedirect)
			case "anthropic.test/moved":
				http.Redirect(w, r, "http://elsewhere.test/v1/messages", http.StatusPermanentRedirect)
			default:
				_, _ = w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[]}}\n\n" +
					"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
			}
		})
		msg := rawRunAgent(t, rawAgent(handler))
		assert.Equal(t, transcript.StopReasonStop, msg.StopReason, msg.ErrorMessage)
		assert.Equal(t, map[string]string{"anthropic.test/v1/messages": keyA, "anthropic.test/moved": keyA, "elsewhere.test/v1/messages": ""}, keys)

		var checked int
		client := providertest.Client(handler)
		client.CheckRedirect = func(*http.Request, []*http.Request) error { checked++; return http.ErrUseLastResponse }
		a := anthropic.New(anthropic.Options{BaseURL: "http://anthropic.test", HTTPClient: client, Secrets: credentials.EnvSecrets{Lookup: lookup}})
		msg = rawRunAgent(t, a)
		assert.Equal(t, 1, checked)
		assert.Equal(t, transcript.StopReasonError, msg.StopReason)
		assert.Equal(t, http.ErrUseLastResponse, client.CheckRedirect(nil, nil), "the embedder's client is left as it was")
	})
}

// rawRunAgent runs a once, outside a session, and returns its last message.
func rawRunAgent(t *testing.T, a *anthropic.Agent) transcript.Message {
	t.Helper()
	var evs []events.Event
	require.NoError(t, a.Run(context.Background(), session.RunRequest{Context: []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hi")}}, Model: a.Model()},
		func(e events.Event) { evs = append(evs, e) }))
	ms := evs[len(evs)-1].(events.AgentEnd).Messages
	return ms[len(ms)-1]
}
