package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/transcript"
)

// leakDump writes every form of what a session gave out: its events (Go
// syntax, %+v, JSON and the RPC wire form), every message's Go error
// (%+v), the turn errors, the history and the log lines. It fails the
// test when any error holds the request (whose header holds the key) or
// the response (providertest.HoldsHTTP).
func leakDump(t *testing.T, evs []events.Event, turnErrs []error, s *session.Session, logs string) string {
	t.Helper()
	var all strings.Builder
	checkErr := func(err error) {
		if err == nil {
			return
		}
		fmt.Fprintf(&all, "%v\n%+v\n", err, err)
		assert.False(t, providertest.HoldsHTTP(err), "the error holds the request or the response: %v", err)
	}
	for _, ev := range evs {
		fmt.Fprintf(&all, "%#v\n%+v\n", ev, ev)
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		all.Write(b)
		if wire, err := rpc.MarshalEvent(ev); err == nil {
			all.Write(wire)
		}
		switch e := ev.(type) {
		case events.MessageEnd:
			checkErr(e.Message.Err)
		case events.AgentEnd:
			for _, m := range e.Messages {
				checkErr(m.Err)
			}
		case events.TurnSettled:
			checkErr(e.Err)
		}
	}
	for _, err := range turnErrs {
		checkErr(err)
	}
	for _, m := range s.Messages() {
		fmt.Fprintf(&all, "%+v\n", m)
		checkErr(m.Err)
	}
	for e, err := range s.History().Entries() {
		require.NoError(t, err)
		b, err := json.Marshal(e)
		require.NoError(t, err)
		all.Write(b)
	}
	all.WriteString(logs)
	return all.String()
}

// TestFailedCallsHoldNoKey attacks as a server that echoes the key: in a
// 401's body and request-id header, URL-escaped in an overloaded error, in
// an error event mid-stream, split across the chunks of a tool call's
// arguments and in the answer's text. No event, message error, turn error,
// history entry or log line holds the key, and no error holds the request
// (whose header holds it).
func TestFailedCallsHoldNoKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		read := anthropic.Tool{Name: "read", Run: func(context.Context, json.RawMessage) (string, error) { return "done", nil }}
		a := newAgent(srv, read)
		logs := &syncWriter{}
		s := newSession(t, a, fastConfig(), session.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
		rec := watch(s)

		unauthorized := providertest.AnthropicError(401, "authentication_error", "invalid x-api-key "+keyA)
		unauthorized.Header.Set("Request-Id", keyA)
		overloaded := providertest.AnthropicError(529, "overloaded_error", "Overloaded for key="+url.QueryEscape(keyA))
		midStream := text("partial answer")
		midStream.Events = append(midStream.Events[:3:3], providertest.AnthropicErrorEvent("overloaded_error", "stream failed for "+keyA))
		srv.Push(
			unauthorized,
			overloaded,
			midStream,
			providertest.AnthropicMessage{Content: []providertest.AnthropicBlock{providertest.AnthropicToolUse("t1", "read", map[string]string{"key": keyA})},
				StopReason: "tool_use"}.Reply(),
			text("your key is "+keyA+" indeed"),
		)
		var turnErrs []error
		err := s.Prompt(context.Background(), "one")
		require.ErrorIs(t, err, policy.ErrProvider)
		turnErrs = append(turnErrs, err)
		require.NoError(t, s.Prompt(context.Background(), "two"))
		assert.Equal(t, 5, len(srv.Requests()))

		dump := leakDump(t, rec.all(), turnErrs, s, logs.String())
		for _, form := range []string{keyA, url.QueryEscape(keyA)} {
			assert.NotContains(t, dump, form)
		}
		assert.Contains(t, dump, session.Redacted)
		assert.Contains(t, lastText(s), "your key is "+session.Redacted+" indeed")
		var args string
		for _, m := range s.Messages() {
			for _, b := range m.Content {
				if b.Type == transcript.BlockToolCall {
					args = string(b.Arguments)
				}
			}
		}
		assert.JSONEq(t, `{"key":"`+session.Redacted+`"}`, args)
	})
}

// syncWriter is a log sink safe for the session's goroutines.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// maxErrorMessage is the longest ErrorMessage session.FailedMessage
// makes, and the longest error text session.ClipError leaves, as their
// docs state it.
const maxErrorMessage = 2048

// TestHugeErrorBodyIsBounded: a 50 MiB error body is read up to
// session.MaxErrorBody, its message cut to maxErrorMessage, and
// nothing of its size is kept once the turn is over.
func TestHugeErrorBodyIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size = 50 << 20
		var written atomic.Int64
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			n, _ := w.Write([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"`))
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
		a := anthropic.New(anthropic.Options{BaseURL: "http://anthropic.test", HTTPClient: providertest.Client(handler),
			Secrets: credentials.EnvSecrets{Lookup: lookup}})
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)

		s := newSession(t, a, fastConfig())
		rec := watch(s)
		err := s.Prompt(context.Background(), "hi")
		require.ErrorIs(t, err, policy.ErrProvider)
		synctest.Wait()
		assert.Less(t, written.Load(), int64(session.MaxErrorBody+256<<10), "the client read past the limit")
		assert.LessOrEqual(t, len(err.Error()), maxErrorMessage+len("policy: provider error: "))
		ends := rec.ends()
		require.Len(t, ends, 1)
		assert.LessOrEqual(t, len(ends[0].ErrorMessage), maxErrorMessage)
		assert.True(t, strings.HasPrefix(ends[0].ErrorMessage, `400 {"type":"error","error":{"type":"invalid_request_error"`), ends[0].ErrorMessage[:80])
		assert.LessOrEqual(t, len(ends[0].Err.Error()), maxErrorMessage)
		for e, err := range s.History().Entries() {
			require.NoError(t, err)
			b, err := json.Marshal(e)
			require.NoError(t, err)
			assert.Less(t, len(b), 8<<10)
		}
		rec = nil
		ends = nil
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		retained := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		t.Logf("heap retained after the turn: %d bytes; read of the body: %d bytes", retained, written.Load())
		assert.Less(t, retained, int64(8<<20), "the turn keeps %d bytes alive", retained)
		runtime.KeepAlive(s)
	})
}

// TestRedirectWithKeyHoldsNoKey: a server that redirects again and again
// to a URL holding the key (query-escaped) makes the client give up with
// an error naming that URL; the session redacts it from the message, the
// turn's error and the history.
func TestRedirectWithKeyHoldsNoKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/v1/messages?k="+url.QueryEscape(keyA), http.StatusTemporaryRedirect)
		})
		a := anthropic.New(anthropic.Options{BaseURL: "http://anthropic.test", HTTPClient: providertest.Client(handler),
			Secrets: credentials.EnvSecrets{Lookup: lookup}})
		cfg := fastConfig()
		cfg.Retry.MaxRetries = 1
		s := newSession(t, a, cfg)
		rec := watch(s)
		err := s.Prompt(context.Background(), "hi")
		require.Error(t, err)
		dump := leakDump(t, rec.all(), []error{err}, s, "")
		assert.NotContains(t, dump, keyA)
		assert.NotContains(t, dump, url.QueryEscape(keyA))
		assert.Contains(t, dump, "redirects")
		assert.Contains(t, dump, session.Redacted)
	})
}
