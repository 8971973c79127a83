package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

const echoedKey = "sk-echo-7Hq2/x+Zp9wL4=="

// keyError is an SDK's error that holds the key in a field and in its
// text, as a server that echoes the key makes one.
type keyError struct {
	key     string
	timeout bool
}

func (e *keyError) Error() string   { return "401 invalid key " + e.key }
func (e *keyError) Timeout() bool   { return e.timeout }
func (e *keyError) Temporary() bool { return e.timeout }

// echoAgent notes its key, then reports what a hostile server sent back:
// the key in text split across deltas, in thinking, in a tool call's
// arguments, in the error message and type, in a header, URL-escaped and
// JSON-escaped, and in the Go error it gives. The run returns an error
// holding the key too.
type echoAgent struct {
	key   string
	calls int
}

func (a *echoAgent) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	session.NoteSecret(ctx, a.key)
	a.calls++
	half := len(a.key) / 2
	head := transcript.Message{Role: transcript.RoleAssistant, Provider: req.Model.Provider, Model: req.Model.ID}
	emit(events.AgentStart{})
	emit(events.CallStart{})
	emit(events.MessageStart{Message: head})
	for _, d := range []string{"your key is ", a.key[:3], a.key[3:half], a.key[half:], " and s", "o on"} {
		emit(events.MessageUpdate{Message: head, Delta: events.Delta{Kind: "text", Text: d}})
	}
	emit(events.MessageUpdate{Message: head, Delta: events.Delta{Kind: "thinking", Index: 1, Text: "k=" + url.QueryEscape(a.key)}})
	jsonKey, _ := json.Marshal(a.key)
	m := head
	m.ID = "m-" + a.key
	m.StopReason = "error"
	m.ErrorMessage = "401 authentication_error: invalid x-api-key " + a.key
	m.ErrorType = "authentication_error"
	m.HTTPStatus = 401
	m.Headers = map[string]string{"request-id": "req-" + url.PathEscape(a.key)}
	m.Err = fmt.Errorf("anthropic: %w", &keyError{key: a.key, timeout: true})
	m.Content = []transcript.Block{
		transcript.TextBlock("your key is " + a.key + " and so on"),
		{Type: transcript.BlockThinking, Thinking: "k=" + url.QueryEscape(a.key), ThinkingSignature: a.key},
		{Type: transcript.BlockToolCall, ID: "t1", Name: "read", Arguments: json.RawMessage(`{"k":` + string(jsonKey) + `}`)},
	}
	emit(events.MessageEnd{Message: m})
	emit(events.CallEnd{})
	emit(events.AgentEnd{Messages: []transcript.Message{m}})
	return fmt.Errorf("echo: the run saw %s", a.key)
}

// secretForms are the forms of key no output may hold.
func secretForms(key string) []string {
	j, _ := json.Marshal(key)
	return []string{key, url.QueryEscape(key), url.PathEscape(key), string(j[1 : len(j)-1])}
}

// lockedBuf is a log sink safe for the session's goroutines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestEchoedSecretIsRedactedEverywhere: a key the server echoes back, in
// any field of what a run reports, is in no event (Go form, JSON, the RPC
// wire form), history line, log line or turn error, and errors.As reaches
// nothing that holds it; the classifier still reads the error's facts.
func TestEchoedSecretIsRedactedEverywhere(t *testing.T) {
	bubble(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "history.jsonl")
		h, err := history.OpenFileHistory(path)
		require.NoError(t, err)
		defer h.Close()
		logs := &lockedBuf{}
		agent := &echoAgent{key: echoedKey}
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithHistory(h),
			session.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
		require.NoError(t, err)
		defer s.Close()
		rec := record(s)

		turnErr := s.Prompt(context.Background(), "hello")
		require.Error(t, turnErr)
		require.ErrorIs(t, turnErr, policy.ErrProvider, "an authentication error is fatal, as before")
		evs := rec.events()

		var all strings.Builder
		var texts, thinking strings.Builder
		for _, ev := range evs {
			fmt.Fprintf(&all, "%#v\n%+v\n", ev, ev)
			b, err := json.Marshal(ev)
			require.NoError(t, err)
			all.Write(b)
			if wire, err := rpc.MarshalEvent(ev); err == nil {
				all.Write(wire)
			}
			if u, ok := ev.(events.MessageUpdate); ok {
				if u.Delta.Kind == "text" {
					texts.WriteString(u.Delta.Text)
				} else {
					thinking.WriteString(u.Delta.Text)
				}
			}
			if e, ok := ev.(events.MessageEnd); ok && e.Message.Err != nil {
				fmt.Fprintf(&all, "%v %+v\n", e.Message.Err, e.Message.Err)
				var ke *keyError
				assert.False(t, errors.As(e.Message.Err, &ke), "the message's error hands out the key's holder")
				var ne net.Error
				require.True(t, errors.As(e.Message.Err, &ne), "a net.Error stays one")
				assert.True(t, ne.Timeout())
			}
		}
		fmt.Fprintf(&all, "%v\n%+v\n%#v\n", turnErr, turnErr, turnErr)
		var ke *keyError
		assert.False(t, errors.As(turnErr, &ke), "the turn's error hands out the key's holder")
		for _, m := range s.Messages() {
			fmt.Fprintf(&all, "%+v\n", m)
		}
		require.NoError(t, h.Close())
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		all.Write(data)
		all.WriteString(logs.String())
		for _, form := range secretForms(echoedKey) {
			assert.NotContains(t, all.String(), form)
		}
		assert.Equal(t, "your key is "+session.Redacted+" and so on", texts.String(),
			"the deltas, split key and all, add up to the redacted text")
		assert.Equal(t, "k="+session.Redacted, thinking.String())
		assert.Contains(t, turnErr.Error(), session.Redacted)
		last := s.Messages()[len(s.Messages())-1]
		assert.Equal(t, `{"k":"`+session.Redacted+`"}`, string(last.Content[2].Arguments))
		assert.Equal(t, 401, last.HTTPStatus)
	})
}

// TestStartFailureAndPanicAreRedacted: the error of a run that could not
// start, and an agent's panic (its log line and the turn's error), hold no
// noted secret.
func TestStartFailureAndPanicAreRedacted(t *testing.T) {
	bubble(t, func(t *testing.T) {
		logs := &lockedBuf{}
		var panics bool
		agent := agentFunc(func(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
			session.NoteSecret(ctx, echoedKey)
			if panics {
				panic("bad key " + echoedKey)
			}
			return errors.New("cannot start with " + echoedKey)
		})
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel),
			session.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
		require.NoError(t, err)
		defer s.Close()
		rec := record(s)
		err1 := s.Prompt(context.Background(), "one")
		require.ErrorIs(t, err1, policy.ErrStartFailed)
		panics = true
		err2 := s.Prompt(context.Background(), "two")
		require.Error(t, err2)
		var all strings.Builder
		fmt.Fprintf(&all, "%+v %+v %s", err1, err2, logs.String())
		for _, ev := range rec.events() {
			b, _ := json.Marshal(ev)
			fmt.Fprintf(&all, "%+v %s", ev, b)
		}
		assert.Contains(t, all.String(), session.Redacted)
		assert.NotContains(t, all.String(), echoedKey)
	})
}

type agentFunc func(ctx context.Context, req session.RunRequest, emit func(events.Event)) error

func (f agentFunc) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	return f(ctx, req, emit)
}

// TestShortSecretIsNotRedacted: a "key" shorter than 8 bytes (a local
// server's placeholder) leaves the text alone; one of 8 bytes is
// redacted (NoteSecret's documented bound).
func TestShortSecretIsNotRedacted(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := &echoAgent{key: "ollama1"}
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel))
		require.NoError(t, err)
		defer s.Close()
		require.Error(t, s.Prompt(context.Background(), "hi"))
		assert.Contains(t, s.Messages()[1].ErrorMessage, "ollama1")
	})
	bubble(t, func(t *testing.T) {
		agent := &echoAgent{key: "ollama12"}
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel))
		require.NoError(t, err)
		defer s.Close()
		require.Error(t, s.Prompt(context.Background(), "hi"))
		assert.NotContains(t, s.Messages()[1].ErrorMessage, "ollama12")
		assert.Contains(t, s.Messages()[1].ErrorMessage, session.Redacted)
	})
}

// The bounds of FailedMessage, as its doc and docs/session.md state them.
const (
	maxErrorMessage = 2048
	maxHeaders      = 64
	maxHeaderValue  = 256
)

// TestFailedMessageBounds: a huge error message, header value or number of
// headers is cut to the documented bounds, on a UTF-8 boundary, keeping
// the retry hints and the error's type.
func TestFailedMessageBounds(t *testing.T) {
	msg := strings.Repeat("é", 3*maxErrorMessage) // two bytes each
	body, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "x" + msg}})
	header := map[string][]string{"Retry-After": {"7"}, "Request-Id": {strings.Repeat("r", 10*maxHeaderValue)}}
	for i := range 500 {
		header[fmt.Sprintf("X-Ratelimit-N%03d", i)] = []string{"1"}
	}
	m := session.FailedMessage(529, header, body, nil)
	assert.LessOrEqual(t, len(m.ErrorMessage), maxErrorMessage)
	assert.True(t, utf8.ValidString(m.ErrorMessage))
	assert.True(t, strings.HasPrefix(m.ErrorMessage, "529 overloaded_error: xé"))
	assert.True(t, strings.HasSuffix(m.ErrorMessage, "é…"))
	assert.Equal(t, "overloaded_error", m.ErrorType)
	assert.Len(t, m.Headers, maxHeaders)
	assert.Equal(t, "7", m.Headers["retry-after"])
	assert.Len(t, m.Headers["request-id"], maxHeaderValue)
	assert.Equal(t, "1", m.Headers["x-ratelimit-n000"])

	long := errors.New(strings.Repeat("ü", maxErrorMessage))
	m = session.FailedMessage(0, nil, nil, long)
	assert.LessOrEqual(t, len(m.ErrorMessage), maxErrorMessage)
	assert.True(t, utf8.ValidString(m.ErrorMessage))
	clipped := session.ClipError(long)
	assert.LessOrEqual(t, len(clipped.Error()), maxErrorMessage)
	assert.True(t, utf8.ValidString(clipped.Error()))
	short := io.ErrUnexpectedEOF
	assert.Same(t, short, session.ClipError(short))
}

// lowerHex is s with the hex digits of its percent escapes in lower case,
// as some servers write them.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = bytes.ToLower(b[i+1 : i+2])[0], bytes.ToLower(b[i+2 : i+3])[0]
		}
	}
	return string(b)
}

// escapedAgent notes its key and reports an answer holding it as servers
// escape it: URL escapes with lower-case hex, JSON with "\/" for "/", and
// tool-call arguments whose strings escape every character as \uXXXX.
type escapedAgent struct{ key string }

func (a *escapedAgent) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	session.NoteSecret(ctx, a.key)
	var unicode strings.Builder
	for _, r := range a.key {
		fmt.Fprintf(&unicode, `\u%04x`, r)
	}
	jsonKey, _ := json.Marshal(a.key)
	slashed := strings.ReplaceAll(string(jsonKey[1:len(jsonKey)-1]), "/", `\/`)
	m := transcript.Message{Role: transcript.RoleAssistant, Provider: req.Model.Provider, Model: req.Model.ID, StopReason: "toolUse"}
	m.Content = []transcript.Block{
		transcript.TextBlock("q=" + lowerHex(url.QueryEscape(a.key)) + " p=" + lowerHex(url.PathEscape(a.key)) + ` j="` + slashed + `"`),
		{Type: transcript.BlockToolCall, ID: "t1", Name: "read", Arguments: json.RawMessage(`{"path":"a\/b","k":"` + unicode.String() + `","n":[1.50,{"` + slashed + `":true}]}`)},
	}
	emit(events.AgentStart{})
	emit(events.CallStart{})
	emit(events.MessageStart{Message: transcript.Message{Role: transcript.RoleAssistant}})
	emit(events.MessageEnd{Message: m})
	emit(events.CallEnd{})
	emit(events.AgentEnd{Messages: []transcript.Message{m}})
	return nil
}

// TestEscapedSecretFormsAreRedacted: a key echoed with lower-case percent
// escapes, with JSON's "\/", or inside tool-call arguments whose JSON
// escapes it character by character, is redacted too; the arguments stay
// the same JSON value otherwise.
func TestEscapedSecretFormsAreRedacted(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, err := session.New(&escapedAgent{key: echoedKey}, session.WithModel(scripted.DefaultModel))
		require.NoError(t, err)
		defer s.Close()
		rec := record(s)
		_ = s.Prompt(context.Background(), "hello")
		var all strings.Builder
		for _, ev := range rec.events() {
			b, err := json.Marshal(ev)
			require.NoError(t, err)
			all.Write(b)
		}
		var m transcript.Message
		for _, msg := range s.Messages() {
			if msg.Role == transcript.RoleAssistant {
				m = msg
				break
			}
		}
		require.Len(t, m.Content, 2)
		assert.Equal(t, "q="+session.Redacted+" p="+session.Redacted+` j="`+session.Redacted+`"`, m.Content[0].Text)
		assert.JSONEq(t, `{"path":"a/b","k":"`+session.Redacted+`","n":[1.50,{"`+session.Redacted+`":true}]}`, string(m.Content[1].Arguments))
		var v map[string]any
		require.NoError(t, json.Unmarshal(m.Content[1].Arguments, &v))
		assert.NotContains(t, fmt.Sprint(v), echoedKey)
		for _, form := range []string{lowerHex(url.QueryEscape(echoedKey)), lowerHex(url.PathEscape(echoedKey)), `sk-echo-7Hq2\/x`} {
			assert.NotContains(t, all.String(), form)
		}
	})
}

// TestSubscriberPanicIsRedacted: a subscriber that panics with a noted
// secret in its value has it logged as [redacted], as every other panic is.
func TestSubscriberPanicIsRedacted(t *testing.T) {
	bubble(t, func(t *testing.T) {
		logs := &lockedBuf{}
		agent := agentFunc(func(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
			session.NoteSecret(ctx, echoedKey)
			return errors.New("no model")
		})
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel),
			session.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
		require.NoError(t, err)
		defer s.Close()
		s.Subscribe(func(ev events.Event) {
			if _, ok := ev.(events.TurnSettled); ok {
				panic("the subscriber saw " + echoedKey)
			}
		})
		require.Error(t, s.Prompt(context.Background(), "one"))
		s.Flush()
		assert.Contains(t, logs.String(), "a subscriber panicked")
		assert.Contains(t, logs.String(), session.Redacted)
		assert.NotContains(t, logs.String(), echoedKey)
	})
}
