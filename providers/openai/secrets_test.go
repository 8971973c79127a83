package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/providertest"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/providers/openai"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
)

// TestOpenAIFailedCallsHoldNoKey attacks as a server that echoes the key:
// in a 401's body and request id header, URL-escaped in a 503, in an error
// event mid-stream, split across the chunks of a tool call's arguments
// and in the answer's text. The harness checks events, history and logs
// for the key; this test adds every message's and turn's error (%+v, the
// RPC wire form) and that no error holds the request (whose header holds
// the key) or the response (providertest.HoldsHTTP).
func TestOpenAIFailedCallsHoldNoKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		key := secrets["OPENAI_API_KEY"]
		read := openai.Tool{Name: "read", Run: func(context.Context, json.RawMessage) (string, error) { return "done", nil }}
		cfg := policy.DefaultConfig()
		cfg.Retry.BaseDelayMs = 1
		h := newHarness(t, cfg, []openai.Tool{read})

		unauthorized := providertest.OpenAIError(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "", "Incorrect API key provided: "+key)
		unauthorized.Header = http.Header{"X-Request-Id": {key}}
		unavailable := providertest.OpenAIError(http.StatusServiceUnavailable, "server_error", "", "", "down for key="+url.QueryEscape(key))
		midStream := completion("partial answer here")
		midStream.Events = append(midStream.Events[:2:2], providertest.OpenAIErrorEvent("server_error", "", "stream failed for "+key))
		h.fake.Push(
			unauthorized,
			unavailable,
			midStream,
			providertest.OpenAICompletion{ToolCalls: []providertest.OpenAIToolCall{{ID: "c1", Name: "read", Arguments: `{"key":"` + key + `"}`}},
				FinishReason: "tool_calls"}.Reply(),
			completion("your key is "+key+" indeed"),
		)
		err1 := h.s.Prompt(context.Background(), "one")
		require.ErrorIs(t, err1, policy.ErrProvider)
		require.NoError(t, h.s.Prompt(context.Background(), "two"))
		assert.Len(t, h.fake.Requests(), 5)

		var all strings.Builder
		checkErr := func(err error) {
			if err == nil {
				return
			}
			fmt.Fprintf(&all, "%v %+v\n", err, err)
			assert.False(t, providertest.HoldsHTTP(err), "the error holds the request or the response: %v", err)
		}
		checkErr(err1)
		for _, ev := range h.recorded() {
			if wire, err := rpc.MarshalEvent(ev); err == nil {
				all.Write(wire)
			}
			switch e := ev.(type) {
			case events.MessageEnd:
				checkErr(e.Message.Err)
			case events.TurnSettled:
				checkErr(e.Err)
			}
		}
		assert.NotContains(t, all.String(), key)
		assert.NotContains(t, all.String(), url.QueryEscape(key))
		last := lastAssistant(t, h.s)
		assert.Equal(t, "your key is "+session.Redacted+" indeed", last.Content[0].Text)
	})
}

// maxErrorMessage is the longest ErrorMessage session.FailedMessage
// makes, and the longest error text session.ClipError leaves, as their
// docs state it.
const maxErrorMessage = 2048

// TestOpenAIHugeErrorBodyIsBounded: an error body is read only so far: the
// adapter makes it end at session.MaxErrorBody, so a 50 MiB body is not
// read (nor kept) past that.
func TestOpenAIHugeErrorBodyIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size = 50 << 20
		var written atomic.Int64
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			n, _ := w.Write([]byte(`{"error":{"type":"invalid_request_error","message":"`))
			written.Add(int64(n))
			for written.Load() < size {
				n, err := w.Write(chunk)
				written.Add(int64(n))
				if err != nil {
					return
				}
			}
			_, _ = w.Write([]byte(`"}}`))
		})
		a := openai.New(openai.Options{Model: providertest.OpenAIModel, BaseURL: "http://openai.test/v1/",
			HTTPClient: providertest.Client(handler), Secrets: credentials.EnvSecrets{Lookup: lookup}})
		s, err := session.New(a, session.WithModel(a.Model()))
		require.NoError(t, err)
		defer s.Close()
		err = s.Prompt(context.Background(), "hi")
		require.ErrorIs(t, err, policy.ErrProvider)
		synctest.Wait()
		assert.Less(t, written.Load(), int64(session.MaxErrorBody+256<<10), "the client read past the limit")
		msgs := s.Messages()
		last := msgs[len(msgs)-1]
		assert.Equal(t, 400, last.HTTPStatus)
		assert.LessOrEqual(t, len(last.ErrorMessage), maxErrorMessage)
		assert.LessOrEqual(t, len(err.Error()), maxErrorMessage+len("policy: provider error: "))
	})
}
