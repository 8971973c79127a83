package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/internal/wiretext"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/transcript"
)

// The tests of this file hand the session text that is not valid UTF-8 in
// every place it takes text from (the agent's messages and events, its
// errors and panics, the summarizer, the credential store, the prompt) and
// check that everything it keeps, emits and writes holds to one rule:
// invalid bytes become U+FFFD, raw JSON (tool call arguments, details) has
// no lone surrogate escape nor a raw U+2028/U+2029 (docs/session.md).

// bad is the message of an agent that puts invalid UTF-8 in every field.
func bad() transcript.Message {
	return transcript.Message{ID: "msg-\xff", Role: transcript.RoleAssistant, StopReason: "toolUse", Provider: "prov\xfe", Model: "mod\xc3",
		ErrorType: "type\xff", Headers: map[string]string{"x-a\xff": "1", "x-a\xfe": "2", "ok": "v\xff"},
		Usage: &transcript.Usage{Input: 10, TotalTokens: 10, Cost: &transcript.Cost{Input: math.NaN(), Output: math.Inf(1), Total: 0.5}},
		Content: []transcript.Block{
			{Type: transcript.BlockThinking, Thinking: "think\xff", ThinkingSignature: "sig\xed\xa0\x80"},
			{Type: transcript.BlockText, Text: "text\xff\u2028", TextSignature: "ts\xfe"},
			{Type: transcript.BlockImage, Data: "iVBO\xff", MimeType: "image/\xfe"},
			{Type: transcript.BlockToolCall, ID: "call\xff", Name: "read\xfe",
				Arguments: json.RawMessage("{\"path\":\"a\xffb\",\"lone\":\"\\ud800\",\"pair\":\"\\ud83d\\ude00\",\"sep\":\"x\u2028y\u2029\"}")},
		}}
}

// toolResult answers bad's tool call, in the same spirit.
func badResult() transcript.Message {
	return transcript.Message{Role: transcript.RoleToolResult, ToolCallID: "call\xff", ToolName: "read\xfe", ToolError: true,
		Content: []transcript.Block{transcript.TextBlock("no such file: \xff")}}
}

// badRun plays bad and its tool result with a streamed update, and ends
// with an agent_end carrying the agent's own copies.
func badRun(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	m, r := bad(), badResult()
	emit(events.AgentStart{})
	emit(events.CallStart{})
	emit(events.MessageStart{Message: m})
	emit(events.MessageUpdate{Message: m, Delta: events.Delta{Kind: "text\xff", Index: 1, Text: "te\xc3"}})
	emit(events.MessageEnd{Message: m})
	emit(events.MessageStart{Message: r})
	emit(events.MessageEnd{Message: r})
	emit(events.CallEnd{})
	emit(events.AgentEnd{Messages: []transcript.Message{m, r}})
	return nil
}

// checkText fails when any string reachable from v is not valid UTF-8 or
// any json.RawMessage is not as wiretext.JSON has it.
func checkText(t *testing.T, what string, v any) {
	t.Helper()
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			if !utf8.ValidString(v.String()) {
				t.Errorf("%s%s: %q is not UTF-8", what, path, v.String())
			}
		case reflect.Slice:
			if raw, ok := v.Interface().(json.RawMessage); ok {
				if got := wiretext.JSON(raw); !bytes.Equal(got, raw) {
					t.Errorf("%s%s: %q does not hold to the rule", what, path, raw)
				}
				return
			}
			for i := range v.Len() {
				walk(path+"[]", v.Index(i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				walk(path+"{key}", it.Key())
				walk(path+"{}", it.Value())
			}
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(path, v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(path+"."+v.Type().Field(i).Name, v.Field(i))
				}
			}
		case reflect.Float64:
			if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
				t.Errorf("%s%s: %v cannot be written as JSON", what, path, f)
			}
		}
	}
	walk("", reflect.ValueOf(v))
}

// checkLines fails unless data is JSON lines, each valid JSON in valid
// UTF-8 with no raw U+2028 or U+2029.
func checkLines(t *testing.T, what string, data []byte) {
	t.Helper()
	for line := range bytes.Lines(data) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		switch {
		case !utf8.Valid(line):
			t.Errorf("%s: a line is not UTF-8: %q", what, line)
		case !json.Valid(line):
			t.Errorf("%s: a line is not JSON: %q", what, line)
		case bytes.ContainsRune(line, '\u2028') || bytes.ContainsRune(line, '\u2029'):
			t.Errorf("%s: a line holds a raw U+2028 or U+2029: %q", what, line)
		}
	}
}

// An agent's messages and events with invalid UTF-8 in every field of
// every block: the runtime context, the events, the history file and the
// RPC lines all hold the same valid text, and a session reopened on the
// history has the context the live one has (round two, item 12).
func TestAgentTextHoldsToTheRule(t *testing.T) {
	bubble(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "h.jsonl")
		h, err := history.OpenFileHistory(path)
		require.NoError(t, err)
		s, rec := newSessionOn(t, playing(badRun), session.WithHistory(h))
		require.NoError(t, s.Prompt(context.Background(), "look"))
		live := s.Messages()
		require.Len(t, live, 3)
		checkText(t, "context", live)

		m := live[1]
		assert.Equal(t, "msg-\uFFFD", m.ID)
		assert.Equal(t, "prov\uFFFD", m.Provider)
		assert.Equal(t, map[string]string{"x-a\uFFFD": "1", "ok": "v\uFFFD"}, m.Headers, "the later key in byte order wins")
		assert.Equal(t, transcript.Cost{Total: 0.5}, *m.Usage.Cost)
		assert.Equal(t, "text\uFFFD\u2028", m.Content[1].Text)
		assert.Equal(t, "sig\uFFFD\uFFFD\uFFFD", m.Content[0].ThinkingSignature)
		assert.Equal(t, `{"path":"a\ufffdb","lone":"\ufffd","pair":"\ud83d\ude00","sep":"x\u2028y\u2029"}`, string(m.Content[3].Arguments))
		assert.Equal(t, "call\uFFFD", live[2].ToolCallID)
		assert.Equal(t, m.Content[3].ID, live[2].ToolCallID, "the result still names its call")

		evs := rec.events()
		var sawUpdate bool
		for _, ev := range evs {
			checkText(t, rpc.EventType(ev), ev)
			line, err := rpc.MarshalEvent(ev)
			require.NoError(t, err)
			checkLines(t, rpc.EventType(ev), line)
			if u, ok := ev.(events.MessageUpdate); ok {
				sawUpdate = true
				assert.Equal(t, events.Delta{Kind: "text\uFFFD", Index: 1, Text: "te\uFFFD"}, u.Delta)
			}
			if end, ok := ev.(events.MessageEnd); ok && end.Message.Role == transcript.RoleAssistant {
				assert.Equal(t, m, end.Message, "the event carries the message the context keeps")
			}
		}
		assert.True(t, sawUpdate)

		require.NoError(t, s.Close())
		require.NoError(t, h.Close())
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		checkLines(t, "history", data)

		h2, err := history.OpenFileHistory(path)
		require.NoError(t, err)
		defer h2.Close()
		s2, err := session.New(playing(), session.WithHistory(h2))
		require.NoError(t, err)
		defer s2.Close()
		assert.Equal(t, live, s2.Messages(), "the reopened session has the live one's context")
		checkRoundTrips(t, s2, h2)

		var out bytes.Buffer
		require.NoError(t, rpc.Serve(context.Background(), s2, strings.NewReader(`{"type":"get_messages"}`+"\n"), &out))
		checkLines(t, "rpc", out.Bytes())
	})
}

// An agent whose run fails before it starts, fails mid-run, or panics with
// text that is not UTF-8: the turn's error, the messages and the events
// hold valid text, and the turn's error still wraps the agent's.
func TestAgentErrorsHoldToTheRule(t *testing.T) {
	cause := errors.New("dial tcp: \xff\xfe")
	for _, c := range []struct {
		name string
		run  runFunc
		want string
	}{
		{"start failed", func(context.Context, session.RunRequest, func(events.Event)) error { return cause }, "dial tcp: \uFFFD\uFFFD"},
		{"mid-run", func(_ context.Context, _ session.RunRequest, emit func(events.Event)) error {
			emit(events.AgentStart{})
			emit(events.MessageStart{Message: transcript.Message{Role: transcript.RoleAssistant}})
			return cause
		}, "dial tcp: \uFFFD\uFFFD"},
		{"panic", func(context.Context, session.RunRequest, func(events.Event)) error { panic("boom \xff") }, "the agent panicked: boom \uFFFD"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				s, rec := newSessionOn(t, playing(c.run))
				err := s.Prompt(context.Background(), "go")
				require.Error(t, err)
				assert.True(t, utf8.ValidString(err.Error()), "%q", err.Error())
				assert.Contains(t, err.Error(), c.want)
				if c.name != "panic" {
					assert.ErrorIs(t, err, cause, "the agent's error is still there to match")
				}
				checkText(t, "context", s.Messages())
				for _, ev := range rec.events() {
					line, err := rpc.MarshalEvent(ev)
					require.NoError(t, err)
					checkLines(t, rpc.EventType(ev), line)
					if st, ok := ev.(events.TurnSettled); ok {
						assert.True(t, utf8.ValidString(st.Err.Error()), "%q", st.Err.Error())
					}
					if end, ok := ev.(events.MessageEnd); ok {
						checkText(t, "message_end", end.Message)
					}
				}
			})
		})
	}
}

// A summarizer's summary and details with invalid UTF-8 (details holding
// raw JSON, which encoding/json writes as it is): the compaction, its
// event, its history line and the compact response hold valid text.
// Details that JSON cannot write fail the compaction with an error that
// says so, whatever the history (round two, item 12).
func TestSummaryHoldsToTheRule(t *testing.T) {
	bubble(t, func(t *testing.T) {
		details := map[string]any{"files\xff": []string{"a\xfe.go"}, "raw": json.RawMessage("{\"x\":\"\xff\\udc00\u2029\"}")}
		sum := summarizerFunc(func(_ context.Context, req policy.SummaryRequest) (policy.Summary, error) {
			assert.Equal(t, "keep \uFFFD", req.Instructions)
			return policy.Summary{Text: "summary \xff", Details: details}, nil
		})
		path := filepath.Join(t.TempDir(), "h.jsonl")
		h, err := history.OpenFileHistory(path)
		require.NoError(t, err)
		defer h.Close()
		s, _ := newSessionOn(t, playing(), session.WithHistory(h), session.WithSummarizer(sum), smallKeep())
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second \xff question, long enough to compact"))
		res, err := s.Compact(context.Background(), "keep \xff")
		require.NoError(t, err)
		assert.Equal(t, "summary \uFFFD", res.Summary)
		checkText(t, "compaction", res)
		raw, ok := res.Details.(json.RawMessage)
		require.True(t, ok, "details whose JSON the rule changes are that JSON, changed: %#v", res.Details)
		assert.JSONEq(t, `{"files\ufffd":["a\ufffd.go"],"raw":{"x":"\ufffd\ufffd\u2029"}}`, string(raw))
		checkText(t, "context", s.Messages())
		assert.Equal(t, "second \uFFFD question, long enough to compact", s.Messages()[1].Text())
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		checkLines(t, "history", data)
	})
	bubble(t, func(t *testing.T) {
		sum := summarizerFunc(func(context.Context, policy.SummaryRequest) (policy.Summary, error) {
			return policy.Summary{Text: "s", Details: map[string]float64{"cost": math.NaN()}}, nil
		})
		s, _ := newSessionOn(t, playing(), session.WithSummarizer(sum), smallKeep())
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough to compact"))
		n := s.Status().MessageCount
		_, err := s.Compact(context.Background(), "")
		require.ErrorContains(t, err, "the summary's details cannot be written as JSON")
		assert.Equal(t, n, s.Status().MessageCount, "the context is unchanged")

		var out bytes.Buffer
		require.NoError(t, rpc.Serve(context.Background(), s, strings.NewReader(`{"id":1,"type":"compact"}`+"\n"), &out))
		checkLines(t, "rpc", out.Bytes())
		assert.Contains(t, out.String(), `"command":"compact","success":false`)
	})
}

// A credential store whose credential ID is not UTF-8: auto_retry_start
// names it in valid text.
func TestCredentialIDHoldsToTheRule(t *testing.T) {
	bubble(t, func(t *testing.T) {
		creds, err := credentials.NewMemoryCredentials(nil, policy.Credential{ID: "team-\xff", Provider: "scripted", Type: "api_key"})
		if err != nil {
			t.Fatal(err)
		}
		s, rec := newSessionOn(t, playing(answer(assistant("error", service503))), session.WithCredentials(creds))
		require.NoError(t, s.Prompt(context.Background(), "go"))
		var seen bool
		for _, ev := range rec.events() {
			if st, ok := ev.(events.AutoRetryStart); ok {
				seen = true
				assert.Equal(t, "team-\uFFFD", st.Credential)
			}
			line, err := rpc.MarshalEvent(ev)
			require.NoError(t, err)
			checkLines(t, rpc.EventType(ev), line)
		}
		assert.True(t, seen)
	})
}

// A session ID or a model whose text is not UTF-8 is refused, named.
func TestSetupTextMustBeUTF8(t *testing.T) {
	_, err := session.New(playing(), session.WithSessionID("s-\xff"))
	assert.ErrorContains(t, err, `session ID "s-\xff" is not valid UTF-8`)
	_, err = session.New(playing(), session.WithModel(policy.Model{Provider: "p", ID: "m\xfe"}))
	assert.ErrorContains(t, err, `model ID "m\xfe" is not valid UTF-8`)
}

// An agent's message that cannot be written at all (a block of an unknown
// type, tool call arguments that are not a JSON object) is refused as the
// agent's error: the run is cancelled and ends in a fatal error message
// saying why, which history and RPC can write. Before, the message stayed
// in the runtime context while history refused it, its events could not be
// encoded (the RPC server wrote an "internal" line in their place), and
// every later get_messages failed (round two, item 12).
func TestUnwritableMessageIsTheAgentsError(t *testing.T) {
	for _, c := range []struct {
		name  string
		block transcript.Block
		says  string
	}{
		{"arguments an array", transcript.Block{Type: transcript.BlockToolCall, ID: "c", Name: "n", Arguments: json.RawMessage(`[1]`)},
			`tool call "c": arguments are not a JSON object`},
		{"arguments with a raw NUL", transcript.Block{Type: transcript.BlockToolCall, ID: "c", Name: "n", Arguments: json.RawMessage("{\"a\":\"\x00\"}")},
			`tool call "c": arguments are not a JSON object`},
		{"unknown type", transcript.Block{Type: "audio\xff"}, "unknown content block type \"audio\uFFFD\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				m := transcript.Message{ID: "a1", Role: transcript.RoleAssistant, StopReason: "toolUse", Content: []transcript.Block{transcript.TextBlock("ok"), c.block}}
				partial := transcript.Message{Role: transcript.RoleAssistant, Content: []transcript.Block{
					{Type: transcript.BlockToolCall, ID: "c", Name: "n", Arguments: json.RawMessage(`{"pa`)}}}
				cancelled := make(chan struct{})
				run := func(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
					emit(events.AgentStart{})
					emit(events.CallStart{})
					emit(events.MessageStart{Message: partial})
					emit(events.MessageUpdate{Message: partial, Delta: events.Delta{Kind: "toolCall", Index: 0, Text: `{"pa`}})
					emit(events.MessageEnd{Message: m})
					<-ctx.Done()
					close(cancelled)
					emit(events.MessageEnd{Message: transcript.Message{Role: transcript.RoleToolResult, ToolCallID: "c", Content: transcript.TextContent("late")}})
					emit(events.AgentEnd{Messages: []transcript.Message{m}})
					return nil
				}
				path := filepath.Join(t.TempDir(), "h.jsonl")
				h, err := history.OpenFileHistory(path)
				require.NoError(t, err)
				defer h.Close()
				s, rec := newSessionOn(t, playing(run), session.WithHistory(h))
				err = s.Prompt(context.Background(), "go")
				require.ErrorIs(t, err, policy.ErrProvider)
				assert.NotErrorIs(t, err, policy.ErrHistory)
				assert.Contains(t, err.Error(), "the agent's assistant message \"a1\" cannot be written: transcript: block 1: "+c.says)
				<-cancelled

				msgs := s.Messages()
				require.Len(t, msgs, 2, "the prompt and the error: neither the refused message nor what came after it")
				assert.Equal(t, "error", string(msgs[1].StopReason))
				var out bytes.Buffer
				require.NoError(t, rpc.Serve(context.Background(), s, strings.NewReader(`{"type":"get_messages"}`+"\n"), &out))
				checkLines(t, "rpc", out.Bytes())
				assert.Contains(t, out.String(), `"command":"get_messages","success":true`)
				for _, ev := range rec.events() {
					line, err := rpc.MarshalEvent(ev)
					require.NoError(t, err, "%#v", ev)
					checkLines(t, rpc.EventType(ev), line)
				}
				msgs[1].Err = nil // never written
				assert.Equal(t, msgs, readMessages(t, h), "history holds what the context holds")
			})
		})
	}
}

// readMessages is the messages of h's message entries.
func readMessages(t *testing.T, h history.History) []transcript.Message {
	var out []transcript.Message
	for _, e := range readAll(t, h) {
		if e.Type == transcript.EntryMessage {
			out = append(out, *e.Message)
		}
	}
	return out
}
