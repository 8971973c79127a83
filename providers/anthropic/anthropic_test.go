package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/internal/providertest"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/providers/anthropic"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	keyA = "sk-ant-api03-first-SECRET-aaaa"
	keyB = "sk-ant-api03-second-SECRET-bbbb"
)

// lookup is an environment holding the test's keys.
func lookup(name string) (string, bool) {
	v, ok := map[string]string{"ANTHROPIC_API_KEY": keyA, "KEY_A": keyA, "KEY_B": keyB}[name]
	return v, ok
}

func newAgent(srv *providertest.Server, tools ...anthropic.Tool) *anthropic.Agent {
	return anthropic.New(anthropic.Options{
		BaseURL:    srv.BaseURL(),
		HTTPClient: srv.Client(),
		Secrets:    credentials.EnvSecrets{Lookup: lookup},
		Tools:      tools,
	})
}

// fastConfig retries at once (in fake time, a millisecond).
func fastConfig() policy.Config {
	cfg := policy.DefaultConfig()
	cfg.Retry.BaseDelayMs = 1
	return cfg
}

// recorder records what a session emits.
type recorder struct {
	mu  sync.Mutex
	evs []events.Event
}

func watch(s *session.Session) *recorder {
	e := &recorder{}
	s.Subscribe(func(ev events.Event) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.evs = append(e.evs, ev)
	})
	return e
}

func (e *recorder) all() []events.Event {
	synctest.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]events.Event(nil), e.evs...)
}

// ends are the messages of the MessageEnd events.
func (e *recorder) ends() []transcript.Message {
	var out []transcript.Message
	for _, ev := range e.all() {
		if m, ok := ev.(events.MessageEnd); ok {
			out = append(out, m.Message)
		}
	}
	return out
}

func text(s string) providertest.Reply {
	return providertest.AnthropicMessage{
		Content: []providertest.AnthropicBlock{providertest.AnthropicText(s)},
		Usage:   providertest.AnthropicUsage{InputTokens: 120, OutputTokens: 8, CacheReadInputTokens: 40, CacheCreationInputTokens: 10},
	}.Reply()
}

func newSession(t *testing.T, a *anthropic.Agent, cfg policy.Config, opts ...session.Option) *session.Session {
	t.Helper()
	s, err := session.New(a, append([]session.Option{session.WithConfig(cfg), session.WithModel(a.Model())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// lastText is the text of the session's last message.
func lastText(s *session.Session) string {
	ms := s.Messages()
	var b strings.Builder
	for _, blk := range ms[len(ms)-1].Content {
		b.WriteString(blk.Text)
	}
	return b.String()
}

// bodyMessages are the messages of a recorded request's body.
func bodyMessages(t *testing.T, r providertest.Request) []map[string]any {
	t.Helper()
	raw, err := json.Marshal(r.Body["messages"])
	require.NoError(t, err)
	var out []map[string]any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// Issue 13 item 2 (1): a 529 is retried once, and the turn succeeds.
func TestOverloadedThenSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		srv.Push(providertest.AnthropicOverloaded(), text("Hello there"))
		s := newSession(t, newAgent(srv), fastConfig())
		ev := watch(s)
		require.NoError(t, s.Prompt(t.Context(), "hi"))
		assert.Equal(t, "Hello there", lastText(s))

		reqs := srv.Settled()
		require.Len(t, reqs, 2)
		for _, r := range reqs {
			assert.True(t, r.Stream)
			assert.Equal(t, keyA, r.Key())
		}
		ends := ev.ends()
		require.Len(t, ends, 2)
		failed := ends[0]
		assert.Equal(t, transcript.StopReasonError, failed.StopReason)
		assert.Equal(t, "529 overloaded_error: Overloaded", failed.ErrorMessage)
		assert.Equal(t, 529, failed.HTTPStatus)
		assert.Equal(t, "overloaded_error", failed.ErrorType)
		assert.True(t, strings.HasPrefix(failed.Headers["request-id"], "req_"), failed.Headers)
		answer := ends[1]
		assert.Equal(t, transcript.StopReasonStop, answer.StopReason)
		assert.Equal(t, "anthropic", answer.Provider)
		assert.Equal(t, providertest.AnthropicModel, answer.Model)
		assert.Equal(t, &transcript.Usage{Input: 120, Output: 8, CacheRead: 40, CacheWrite: 10, TotalTokens: 178}, answer.Usage)
		assert.Equal(t, 1, count[events.AutoRetryStart](ev.all()))
		var deltas []string
		for _, e := range ev.all() {
			if u, ok := e.(events.MessageUpdate); ok {
				assert.Equal(t, "text", u.Delta.Kind)
				deltas = append(deltas, u.Delta.Text)
			}
		}
		assert.Equal(t, []string{"Hello ", "there"}, deltas)
	})
}

// count returns a counter of the events of type E.
func count[E events.Event](evs []events.Event) int {
	n := 0
	for _, ev := range evs {
		if _, ok := ev.(E); ok {
			n++
		}
	}
	return n
}

// Issue 13 item 2 (2): a 429's retry-after is the wait when the settings
// honour it.
func TestRateLimitHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		srv.Push(providertest.AnthropicRateLimit(20*time.Second, time.Now()), text("done"))
		cfg := fastConfig()
		cfg.Retry.HonorRetryAfter = true
		s := newSession(t, newAgent(srv), cfg)
		ev := watch(s)
		start := time.Now()
		require.NoError(t, s.Prompt(t.Context(), "hi"))
		assert.Equal(t, 20*time.Second, time.Since(start))
		var waits []int64
		for _, e := range ev.all() {
			if r, ok := e.(events.AutoRetryStart); ok {
				waits = append(waits, r.DelayMs)
			}
		}
		assert.Equal(t, []int64{20000}, waits)
		failed := ev.ends()[0]
		assert.Equal(t, "20", failed.Headers["retry-after"])
		assert.Equal(t, "0", failed.Headers["anthropic-ratelimit-requests-remaining"])
		assert.Equal(t, "rate_limit_error", failed.ErrorType)
	})
}

// Issue 13 item 2 (3): "prompt is too long" compacts the context and the
// continuation succeeds, sent with the summary in place of the cut messages.
func TestOverflowCompactsAndContinues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		cfg := fastConfig()
		cfg.Compaction.KeepRecentTokens = 50
		s := newSession(t, newAgent(srv), cfg)
		ev := watch(s)
		long := strings.Repeat("lorem ipsum dolor sit amet ", 30)
		for i := range 3 {
			srv.Push(text(fmt.Sprintf("answer %d: %s", i, long)))
			require.NoError(t, s.Prompt(t.Context(), fmt.Sprintf("question %d: %s", i, long)))
		}
		srv.Push(providertest.AnthropicPromptTooLong(213462, 200000), text("continued"))
		require.NoError(t, s.Prompt(t.Context(), "and now?"))
		assert.Equal(t, "continued", lastText(s))
		assert.Equal(t, 1, count[events.AutoCompactionStart](ev.all()))

		reqs := srv.Settled()
		require.Len(t, reqs, 5)
		before, after := bodyMessages(t, reqs[3]), bodyMessages(t, reqs[4])
		assert.Less(t, len(after), len(before))
		first, err := json.Marshal(after[0])
		require.NoError(t, err)
		assert.Contains(t, string(first), "compacted into the following summary")
		last, err := json.Marshal(after[len(after)-1])
		require.NoError(t, err)
		assert.Contains(t, string(last), "and now?")
	})
}

// Issue 13 item 2 (4): a stream cut part-way (a reset, an unexpected EOF,
// or a clean end without message_stop) is a transient failure, retried.
func TestCutStreamIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{{"reset", nil}, {"unexpected EOF", io.ErrUnexpectedEOF}, {"clean EOF", io.EOF}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := providertest.NewAnthropic(t)
				cut := text("a long answer that is cut")
				cut.Break = &providertest.Break{After: 4, Err: tc.err}
				srv.Push(cut, text("whole"))
				s := newSession(t, newAgent(srv), fastConfig())
				ev := watch(s)
				require.NoError(t, s.Prompt(t.Context(), "hi"))
				assert.Equal(t, "whole", lastText(s))
				failed := ev.ends()[0]
				assert.Equal(t, transcript.StopReasonError, failed.StopReason)
				assert.Error(t, failed.Err)
				assert.Equal(t, 1, count[events.AutoRetryStart](ev.all()), failed.ErrorMessage)
			})
		})
	}
}

// A stream that goes silent past the idle timeout is ended and retried
// as a transient failure; the stalled request is cancelled.
func TestIdleStreamIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		stalled := text("stalls here")
		stalled.Break = &providertest.Break{After: 2, Stall: true}
		srv.Push(stalled, text("whole"))
		s := newSession(t, newAgent(srv), fastConfig())
		ev := watch(s)
		start := time.Now()
		require.NoError(t, s.Prompt(t.Context(), "hi"))
		assert.Equal(t, anthropic.DefaultIdleTimeout+time.Millisecond, time.Since(start), "the idle timeout, then the base delay")
		assert.Equal(t, "whole", lastText(s))
		reqs := srv.Settled()
		require.Len(t, reqs, 2)
		assert.True(t, reqs[0].Cancelled)
		failed := ev.ends()[0]
		assert.Equal(t, "anthropic: timed out: no data from the server for 5m0s (Options.IdleTimeout)", failed.ErrorMessage)
	})
}

// Issue 13 item 2 (5): the model asks for a tool, the tool runs, its result
// goes back, and the final answer comes; a 529 in between is retried with
// the tool call and its result still in the request.
func TestToolRoundTripSurvivesRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		ask := providertest.AnthropicMessage{Content: []providertest.AnthropicBlock{
			providertest.AnthropicThinking("Read it first.", "sig-1"),
			providertest.AnthropicText("Reading."),
			providertest.AnthropicToolUse("toolu_1", "read", map[string]any{"path": "main.go"}),
			providertest.AnthropicToolUse("toolu_2", "fail", map[string]any{}),
		}}.Reply()
		srv.Push(ask, providertest.AnthropicOverloaded(), text("main.go is a hello world"))
		var calls []string
		read := anthropic.Tool{Name: "read", Description: "Reads a file.",
			Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
			Run: func(_ context.Context, args json.RawMessage) (string, error) {
				calls = append(calls, string(args))
				return "package main", nil
			}}
		fail := anthropic.Tool{Name: "fail", Run: func(context.Context, json.RawMessage) (string, error) {
			return "", errors.New("disk on fire")
		}}
		s := newSession(t, newAgent(srv, read, fail), fastConfig())
		ev := watch(s)
		require.NoError(t, s.Prompt(t.Context(), "what is in main.go?"))
		assert.Equal(t, "main.go is a hello world", lastText(s))
		assert.Equal(t, []string{`{"path":"main.go"}`}, calls, "the tool runs once, not again on the retry")

		ends := ev.ends()
		require.Len(t, ends, 5)
		assert.Equal(t, transcript.StopReasonToolUse, ends[0].StopReason)
		assert.Equal(t, []transcript.Block{
			{Type: transcript.BlockThinking, Thinking: "Read it first.", ThinkingSignature: "sig-1"},
			transcript.TextBlock("Reading."),
			{Type: transcript.BlockToolCall, ID: "toolu_1", Name: "read", Arguments: json.RawMessage(`{"path":"main.go"}`)},
			{Type: transcript.BlockToolCall, ID: "toolu_2", Name: "fail", Arguments: json.RawMessage(`{}`)},
		}, ends[0].Content)
		assert.Equal(t, transcript.Message{Role: transcript.RoleToolResult, ToolCallID: "toolu_1", ToolName: "read",
			Content: transcript.TextContent("package main")}, withoutStamp(ends[1]))
		assert.Equal(t, transcript.Message{Role: transcript.RoleToolResult, ToolCallID: "toolu_2", ToolName: "fail", ToolError: true,
			Content: transcript.TextContent("disk on fire")}, withoutStamp(ends[2]))
		assert.Equal(t, "529 overloaded_error: Overloaded", ends[3].ErrorMessage)

		reqs := srv.Settled()
		require.Len(t, reqs, 3)
		tools, err := json.Marshal(reqs[0].Body["tools"])
		require.NoError(t, err)
		assert.JSONEq(t, `[{"name":"read","description":"Reads a file.","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},
			{"name":"fail","input_schema":{"type":"object","properties":{}}}]`, string(tools))
		want := `[{"role":"user","content":[{"type":"text","text":"what is in main.go?"}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"Read it first.","signature":"sig-1"},{"type":"text","text":"Reading."},
				{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"main.go"}},{"type":"tool_use","id":"toolu_2","name":"fail","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"package main"}]},
				{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"disk on fire"}]}]}]`
		for _, i := range []int{1, 2} {
			got, err := json.Marshal(reqs[i].Body["messages"])
			require.NoError(t, err)
			assert.JSONEq(t, want, string(got), "request %d", i)
		}
	})
}

func withoutStamp(m transcript.Message) transcript.Message {
	m.ID, m.Timestamp = "", 0
	return m
}

// Issue 13 item 2 (6): an abort while the stream is in flight cancels the
// request, the message ends aborted, and Prompt returns ErrAborted.
func TestAbortMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		stalled := text("this answer never ends")
		stalled.Break = &providertest.Break{After: 4, Stall: true}
		srv.Push(stalled)
		s := newSession(t, newAgent(srv), fastConfig())
		ev := watch(s)
		done := make(chan error, 1)
		go func() { done <- s.Prompt(context.Background(), "hi") }()
		synctest.Wait()
		s.Abort()
		err := <-done
		require.ErrorIs(t, err, policy.ErrAborted)
		reqs := srv.Settled()
		require.Len(t, reqs, 1)
		assert.True(t, reqs[0].Cancelled)
		assert.False(t, reqs[0].Complete)
		ends := ev.ends()
		require.Len(t, ends, 1)
		assert.Equal(t, transcript.StopReasonAborted, ends[0].StopReason)
		assert.Equal(t, []transcript.Block{transcript.TextBlock("this ")}, ends[0].Content)
		assert.Equal(t, 0, count[events.AutoRetryStart](ev.all()))
	})
}

// Issue 13 item 2 (6): Prompt's context ending aborts the call the same way.
func TestPromptDeadlineMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		stalled := text("slow")
		stalled.Break = &providertest.Break{After: 2, Stall: true}
		srv.Push(stalled)
		s := newSession(t, newAgent(srv), fastConfig())
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		start := time.Now()
		err := s.Prompt(ctx, "hi")
		require.ErrorIs(t, err, policy.ErrAborted)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 30*time.Second, time.Since(start))
		assert.True(t, srv.Settled()[0].Cancelled)
	})
}

// Issue 13 item 2 (7, 8): a usage limit switches to the second credential,
// whose key the next request carries; no key is in any event, message,
// history entry or log line.
func TestUsageLimitSwitchesKey(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply providertest.Reply
	}{
		{"credit balance too low", providertest.AnthropicCreditBalanceTooLow()},
		{"spend limit", providertest.AnthropicSpendLimit()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := providertest.NewAnthropic(t)
				srv.Push(providertest.AnthropicOverloaded(), tc.reply, text("paid for"))
				cfg := fastConfig()
				cfg.Retry.Rules = classify.Extended
				creds, err := credentials.NewMemoryCredentials(nil,
					policy.Credential{ID: "a", Provider: "anthropic", Type: "api_key", Secret: "env:KEY_A"},
					policy.Credential{ID: "b", Provider: "anthropic", Type: "api_key", Secret: "env:KEY_B"})
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(t.TempDir(), "history.jsonl")
				h, err := history.OpenFileHistory(path)
				require.NoError(t, err)
				var logs bytes.Buffer
				logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				s := newSession(t, newAgent(srv), cfg, session.WithCredentials(creds), session.WithHistory(h),
					session.WithLogger(logger), session.WithSessionID("s1"))
				ev := watch(s)
				require.NoError(t, s.Prompt(t.Context(), "hi"))
				assert.Equal(t, "paid for", lastText(s))

				reqs := srv.Settled()
				require.Len(t, reqs, 3)
				assert.Equal(t, reqs[0].Key(), reqs[1].Key(), "an overload does not switch")
				assert.NotEqual(t, reqs[1].Key(), reqs[2].Key(), "the usage limit switches")
				assert.ElementsMatch(t, []string{keyA, keyB}, []string{reqs[1].Key(), reqs[2].Key()})

				snap, err := s.Snapshot()
				require.NoError(t, err)
				require.NoError(t, s.Close())
				var dump bytes.Buffer
				for _, e := range ev.all() {
					fmt.Fprintf(&dump, "%+v\n%#v\n", e, e)
					if b, err := json.Marshal(e); err == nil {
						dump.Write(b)
					}
				}
				snapJSON, err := json.Marshal(snap)
				require.NoError(t, err)
				file, err := os.ReadFile(path)
				require.NoError(t, err)
				for where, text := range map[string]string{"events": dump.String(), "snapshot": string(snapJSON), "history": string(file), "log": logs.String()} {
					for _, key := range []string{keyA, keyB, "SECRET"} {
						assert.NotContains(t, text, key, where)
					}
				}
				assert.NotEmpty(t, file)
			})
		})
	}
}

// The run that cannot resolve its secret fails before any event and any
// request, naming what is missing.
func TestMissingSecretFailsBeforeEmitting(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	a := anthropic.New(anthropic.Options{BaseURL: srv.BaseURL(), HTTPClient: srv.Client(),
		Secrets: credentials.EnvSecrets{Lookup: func(string) (string, bool) { return "", false }}})
	var evs []events.Event
	err := a.Run(t.Context(), session.RunRequest{Context: []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hi")}}},
		func(e events.Event) { evs = append(evs, e) })
	require.ErrorIs(t, err, credentials.ErrNoSecret)
	assert.Contains(t, err.Error(), "ANTHROPIC_API_KEY")
	assert.Empty(t, evs)
	assert.Empty(t, srv.Requests())
}

// Issue 13 item 2: an error event after the 200 is reported with its type
// and message, not the stream's status, and retried.
func TestStreamErrorEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		evs := providertest.AnthropicMessage{Content: []providertest.AnthropicBlock{providertest.AnthropicText("partial answer")}}.Events()[:4]
		srv.Push(providertest.Reply{Events: append(evs, providertest.AnthropicErrorEvent("overloaded_error", "Overloaded"))}, text("whole"))
		s := newSession(t, newAgent(srv), fastConfig())
		ev := watch(s)
		require.NoError(t, s.Prompt(t.Context(), "hi"))
		failed := ev.ends()[0]
		assert.Equal(t, "overloaded_error: Overloaded", failed.ErrorMessage)
		assert.Equal(t, "overloaded_error", failed.ErrorType)
		assert.Zero(t, failed.HTTPStatus)
		assert.Equal(t, 1, count[events.AutoRetryStart](ev.all()))
	})
}

// Issue 13 item 2: the model_context_window_exceeded stop reason is an
// overflow: the session compacts and continues.
func TestContextWindowExceededIsOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		cfg := fastConfig()
		cfg.Compaction.KeepRecentTokens = 50
		s := newSession(t, newAgent(srv), cfg)
		ev := watch(s)
		long := strings.Repeat("lorem ipsum dolor sit amet ", 30)
		for i := range 3 {
			srv.Push(text(long))
			require.NoError(t, s.Prompt(t.Context(), fmt.Sprintf("question %d: %s", i, long)))
		}
		full := providertest.AnthropicMessage{Content: []providertest.AnthropicBlock{providertest.AnthropicText("The summary so far is")},
			StopReason: "model_context_window_exceeded", Usage: providertest.AnthropicUsage{InputTokens: 199000, OutputTokens: 1000}}
		srv.Push(full.Reply(), text("continued"))
		require.NoError(t, s.Prompt(t.Context(), "and now?"))
		assert.Equal(t, "continued", lastText(s))
		assert.Equal(t, 1, count[events.AutoCompactionStart](ev.all()))
		ends := ev.ends()
		overflow := ends[len(ends)-2]
		assert.Equal(t, transcript.StopReasonError, overflow.StopReason)
		assert.Equal(t, "model_context_window_exceeded", overflow.ErrorType)
		assert.Contains(t, overflow.ErrorMessage, "model_context_window_exceeded")
	})
}

// run calls the agent once, outside a session, and returns its events.
func run(t *testing.T, a *anthropic.Agent, ctx []transcript.Message) ([]events.Event, error) {
	t.Helper()
	var evs []events.Event
	err := a.Run(t.Context(), session.RunRequest{Context: ctx, Model: a.Model()}, func(e events.Event) { evs = append(evs, e) })
	return evs, err
}

// Issue 13 item 2: every kind of block and message reaches the API in its
// shape: images, redacted and unsigned thinking, the compaction summary as
// a user message, failed messages left out, a tool call that lost its
// result answered with an error result.
func TestContextConversion(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	srv.Push(providertest.AnthropicMessage{Content: []providertest.AnthropicBlock{providertest.AnthropicText("cut")}, StopReason: "max_tokens"}.Reply())
	ctx := []transcript.Message{
		{Role: transcript.RoleSummary, Content: transcript.TextContent("We read main.go.")},
		{Role: transcript.RoleUser, Content: []transcript.Block{transcript.TextBlock("look:"), {Type: transcript.BlockImage, Data: "iVBORw0KGgo=", MimeType: "image/png"}}},
		{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Content: []transcript.Block{
			{Type: transcript.BlockThinking, Thinking: "opaque==", Redacted: true},
			{Type: transcript.BlockThinking, Thinking: "another model's reasoning"},
			{Type: transcript.BlockToolCall, ID: "toolu_9", Name: "read", Arguments: json.RawMessage(`{"path":"a<b>.go"}`)},
		}},
		{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError, ErrorMessage: "529 overloaded_error: Overloaded"},
		{Role: transcript.RoleUser, Content: transcript.TextContent("go on")},
		// Another provider's signed thinking (an OpenAI-compatible
		// server's, signed with the field it came in) goes as text, its
		// redacted thinking not at all: the API would refuse them.
		{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Provider: "openai", Model: "deepseek-chat", Content: []transcript.Block{
			{Type: transcript.BlockThinking, Thinking: "deepseek's reasoning", ThinkingSignature: "reasoning_content"},
			{Type: transcript.BlockThinking, Thinking: "b3BhcXVl", Redacted: true},
			transcript.TextBlock("an answer"),
		}},
		{Role: transcript.RoleUser, Content: transcript.TextContent("and then?")},
	}
	evs, err := run(t, newAgent(srv), ctx)
	require.NoError(t, err)
	got, err := json.Marshal(srv.Settled()[0].Body["messages"])
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"role":"user","content":[{"type":"text","text":"The conversation before this point was compacted into the following summary:\n\nWe read main.go."},
			{"type":"text","text":"look:"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},
		{"role":"assistant","content":[{"type":"redacted_thinking","data":"opaque=="},{"type":"text","text":"another model's reasoning"},
			{"type":"tool_use","id":"toolu_9","name":"read","input":{"path":"a<b>.go"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","is_error":true,"content":[{"type":"text","text":"No result was provided."}]},
			{"type":"text","text":"go on"}]},
		{"role":"assistant","content":[{"type":"text","text":"deepseek's reasoning"},{"type":"text","text":"an answer"}]},
		{"role":"user","content":[{"type":"text","text":"and then?"}]}]`, string(got))

	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, fmt.Sprintf("%T", e))
	}
	assert.Equal(t, []string{"events.AgentStart", "events.CallStart", "events.MessageStart", "events.MessageUpdate",
		"events.MessageEnd", "events.CallEnd", "events.AgentEnd"}, kinds)
	end := evs[4].(events.MessageEnd).Message
	assert.Equal(t, transcript.StopReasonLength, end.StopReason)
	assert.Equal(t, []transcript.Message{end}, evs[6].(events.AgentEnd).Messages)
}

// Bad input fails the run before it emits or sends anything, with an error
// that names what was wrong.
func TestBadInputFailsBeforeEmitting(t *testing.T) {
	good := []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hi")}}
	for _, tc := range []struct {
		name  string
		tools []anthropic.Tool
		ctx   []transcript.Message
		want  string
	}{
		{"schema not an object", []anthropic.Tool{{Name: "x", Schema: json.RawMessage(`[1]`)}}, good, `tool "x": the schema is not a JSON object`},
		{"schema not JSON", []anthropic.Tool{{Name: "x", Schema: json.RawMessage(`{`)}}, good, `tool "x": the schema is not a JSON object`},
		{"required not names", []anthropic.Tool{{Name: "x", Schema: json.RawMessage(`{"required":"a"}`)}}, good, `tool "x": the schema's required`},
		{"tool without name", []anthropic.Tool{{}}, good, "a tool has no name"},
		{"two tools of one name", []anthropic.Tool{{Name: "x"}, {Name: "x"}}, good, `two tools are named "x"`},
		{"image in an assistant message", nil, []transcript.Message{{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop,
			Content: []transcript.Block{{Type: transcript.BlockImage, Data: "x", MimeType: "image/png"}}}}, `message 0: an assistant message cannot hold a block of type "image"`},
		{"tool call in a user message", nil, []transcript.Message{{Role: transcript.RoleUser,
			Content: []transcript.Block{{Type: transcript.BlockToolCall, ID: "t"}}}}, `message 0: a user message cannot hold a block of type "toolCall"`},
		{"arguments not an object", nil, []transcript.Message{{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonToolUse,
			Content: []transcript.Block{{Type: transcript.BlockToolCall, ID: "t", Arguments: json.RawMessage(`[]`)}}}}, `tool call "t": arguments are not a JSON object`},
		{"unknown role", nil, []transcript.Message{{Role: "system"}}, `message 0: unknown role "system"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := providertest.NewAnthropic(t)
			a := anthropic.New(anthropic.Options{BaseURL: srv.BaseURL(), HTTPClient: srv.Client(),
				Secrets: credentials.EnvSecrets{Lookup: lookup}, Tools: tc.tools})
			evs, err := run(t, a, tc.ctx)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "anthropic: "), err.Error())
			assert.Empty(t, evs)
			assert.Empty(t, srv.Requests())
		})
	}
}

// The agent names its model with the context window the table knows; a
// dated ID takes its family's; the embedder's table overrides.
func TestModelContextWindow(t *testing.T) {
	assert.Equal(t, policy.Model{Provider: "anthropic", ID: anthropic.DefaultModel, ContextWindow: 200000}, anthropic.New(anthropic.Options{}).Model())
	assert.Equal(t, 200000, anthropic.New(anthropic.Options{Model: "claude-sonnet-4-5-20250929"}).Model().ContextWindow)
	assert.Equal(t, 1000000, anthropic.New(anthropic.Options{Model: "claude-sonnet-4-5",
		ContextWindows: map[string]int{"claude-sonnet-4-5": 1000000}}).Model().ContextWindow)
	assert.Equal(t, 0, anthropic.New(anthropic.Options{Model: "my-gateway-model"}).Model().ContextWindow)
	w := anthropic.ContextWindows()
	w["claude-sonnet-4-5"] = 1
	assert.Equal(t, 200000, anthropic.New(anthropic.Options{}).Model().ContextWindow, "the table is a copy")
}

// Issue 13 item 2: the class of each failure the adapter reports, under
// both rule sets: the table of docs/providers.md, "The Anthropic adapter".
func TestErrorClasses(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cut := func(err error) providertest.Reply {
		r := text("an answer cut short")
		r.Break = &providertest.Break{After: 4, Err: err}
		return r
	}
	overflowStop := providertest.AnthropicMessage{Content: []providertest.AnthropicBlock{providertest.AnthropicText("x")},
		StopReason: "model_context_window_exceeded"}.Reply()
	streamErr := func(typ, msg string) providertest.Reply {
		evs := providertest.AnthropicMessage{Content: []providertest.AnthropicBlock{providertest.AnthropicText("partial answer")}}.Events()[:4]
		return providertest.Reply{Events: append(evs, providertest.AnthropicErrorEvent(typ, msg))}
	}
	for _, tc := range []struct {
		name           string
		reply          providertest.Reply
		seed, extended string
		usage          bool // the usage-limit branch, under both sets
	}{
		{"529 overloaded", providertest.AnthropicOverloaded(), "retryable", "retryable", false},
		{"500 api_error", providertest.AnthropicError(500, "api_error", "Internal server error"), "retryable", "retryable", false},
		{"429 rate limit", providertest.AnthropicRateLimit(20*time.Second, now), "retryable", "retryable", false},
		{"429 spend limit", providertest.AnthropicSpendLimit(), "retryable", "usage_limit", true},
		{"400 credit balance", providertest.AnthropicCreditBalanceTooLow(), "fatal", "usage_limit", false},
		{"402 billing_error", providertest.AnthropicError(402, "billing_error", "Your credit balance is too low to access the Anthropic API."), "retryable", "usage_limit", true},
		{"400 prompt too long", providertest.AnthropicPromptTooLong(213462, 200000), "overflow", "overflow", false},
		{"413 request too large", providertest.AnthropicError(413, "request_too_large", "Request exceeds the maximum allowed number of bytes."), "overflow", "overflow", false},
		{"401 authentication", providertest.AnthropicError(401, "authentication_error", "invalid x-api-key"), "fatal", "fatal", false},
		{"403 permission", providertest.AnthropicError(403, "permission_error", "Your API key does not have permission to use the specified resource."), "fatal", "fatal", false},
		{"404 not found", providertest.AnthropicError(404, "not_found_error", "model: claude-nonexistent"), "fatal", "fatal", false},
		{"error event overloaded", streamErr("overloaded_error", "Overloaded"), "retryable", "retryable", false},
		{"connection reset mid-stream", cut(nil), "retryable", "retryable", false},
		{"unexpected EOF mid-stream", cut(io.ErrUnexpectedEOF), "retryable", "retryable", false},
		{"stream ends without message_stop", cut(io.EOF), "retryable", "retryable", false},
		{"stop model_context_window_exceeded", overflowStop, "overflow", "overflow", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := providertest.NewAnthropic(t)
			srv.Push(tc.reply)
			evs, err := run(t, newAgent(srv), []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hi")}})
			require.NoError(t, err)
			var m transcript.Message
			for _, e := range evs {
				if end, ok := e.(events.MessageEnd); ok {
					m = end.Message
				}
			}
			cm := classify.Message{StopReason: m.StopReason, ErrorMessage: m.ErrorMessage, Status: m.HTTPStatus,
				ErrorType: m.ErrorType, Headers: m.Headers, Err: m.Err, ContextWindow: 200000}
			if tc.usage {
				// Issue item 4: the spend codes decide as types, the text aside.
				typed := cm
				typed.ErrorMessage, typed.Err = "", nil
				assert.Equal(t, classify.UsageLimit, classify.Extended.Classify(typed, now).Class, "typed: %s", m.ErrorType)
			}
			seed, extended := classify.Seed.Classify(cm, now), classify.Extended.Classify(cm, now)
			assert.Equal(t, tc.seed, seed.Class.String(), "seed: %s", m.ErrorMessage)
			assert.Equal(t, tc.extended, extended.Class.String(), "extended: %s", m.ErrorMessage)
			assert.Equal(t, tc.usage, seed.UsageLimit, "seed usage-limit branch: %s", m.ErrorMessage)
			t.Logf("%s | %q", tc.name, m.ErrorMessage)
		})
	}
}

// A stream cut after message_stop delivered the whole message: it is the
// answer, not a failure to retry (the SDK reads on to the end of the body).
func TestResetAfterMessageStopIsSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		whole := text("complete")
		whole.Break = &providertest.Break{After: len(whole.Events)}
		srv.Push(whole)
		s := newSession(t, newAgent(srv), fastConfig())
		ev := watch(s)
		require.NoError(t, s.Prompt(t.Context(), "hi"))
		assert.Equal(t, "complete", lastText(s))
		assert.Equal(t, 0, count[events.AutoRetryStart](ev.all()))
		assert.Len(t, srv.Settled(), 1)
	})
}

// Issue item 1: after a usage limit switched the session to the other
// key, an overflow's model summary is asked with that key, not the
// default one.
func TestSummaryFollowsKeySwitch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		agent := anthropic.New(anthropic.Options{BaseURL: srv.BaseURL(), HTTPClient: srv.Client(),
			Secrets: credentials.EnvSecrets{Lookup: func(name string) (string, bool) {
				v, ok := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-default", "KEY_A": keyA, "KEY_B": keyB}[name]
				return v, ok
			}}})
		cfg := fastConfig()
		cfg.Retry.Rules = classify.Extended
		cfg.Compaction.KeepRecentTokens = 5
		creds, err := credentials.NewMemoryCredentials(nil,
			policy.Credential{ID: "a", Provider: "anthropic", Type: "api_key", Secret: "env:KEY_A"},
			policy.Credential{ID: "b", Provider: "anthropic", Type: "api_key", Secret: "env:KEY_B"})
		if err != nil {
			t.Fatal(err)
		}
		s := newSession(t, agent, cfg, session.WithCredentials(creds), session.WithSummarizer(session.AgentSummarizer{Agent: agent}))
		srv.Push(text("first answer"), providertest.AnthropicCreditBalanceTooLow(), providertest.AnthropicPromptTooLong(213462, 200000),
			text("## Goal\nAnswer the questions."), text("continued"))
		require.NoError(t, s.Prompt(t.Context(), "first question, long enough to matter"))
		require.NoError(t, s.Prompt(t.Context(), "second question, long enough too"))
		assert.Equal(t, "continued", lastText(s))
		// The model's answer, cut to the room the overflow's count leaves
		// the summary (docs/session.md, "Calibration").
		assert.True(t, strings.HasPrefix("## Goal\nAnswer the questions.", s.Messages()[0].Text()), s.Messages()[0].Text())
		assert.NotEmpty(t, s.Messages()[0].Text())

		reqs := srv.Settled()
		require.Len(t, reqs, 5)
		assert.NotEqual(t, reqs[1].Key(), reqs[2].Key(), "the usage limit switched keys")
		assert.Contains(t, string(reqs[3].Raw), "first question", "the summary request")
		assert.Equal(t, reqs[2].Key(), reqs[3].Key(), "the summary is asked with the key switched to")
		assert.Equal(t, reqs[2].Key(), reqs[4].Key())
		assert.Equal(t, anthropic.DefaultModel, reqs[3].Body["model"])
	})
}

// Issue item 2: a model that keeps calling tools ends the run at the cap
// of tool rounds, with a fatal error naming the cap: the session does not
// retry it, and no model call goes out past the cap.
func TestToolRoundsCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		again := func(i int) providertest.Reply {
			return providertest.AnthropicMessage{Content: []providertest.AnthropicBlock{
				providertest.AnthropicToolUse(fmt.Sprintf("toolu_%d", i), "read", map[string]any{"path": "main.go"}),
			}}.Reply()
		}
		srv.Push(again(1), again(2), again(3))
		runs := 0
		read := anthropic.Tool{Name: "read", Run: func(context.Context, json.RawMessage) (string, error) {
			runs++
			return "package main", nil
		}}
		agent := anthropic.New(anthropic.Options{BaseURL: srv.BaseURL(), HTTPClient: srv.Client(),
			Secrets: credentials.EnvSecrets{Lookup: lookup}, Tools: []anthropic.Tool{read}, MaxToolRounds: 2})
		s := newSession(t, agent, fastConfig())
		ev := watch(s)
		err := s.Prompt(t.Context(), "loop")
		require.ErrorIs(t, err, policy.ErrProvider)
		assert.ErrorContains(t, err, "cap of 2 tool rounds")
		assert.Equal(t, 2, runs)
		assert.Len(t, srv.Settled(), 2, "no model call past the cap")
		assert.Zero(t, count[events.AutoRetryStart](ev.all()), "not retried")
		ends := ev.ends()
		last := ends[len(ends)-1]
		assert.Equal(t, transcript.StopReasonError, last.StopReason)
		assert.Equal(t, anthropic.ErrorTypeToolRounds, last.ErrorType)
		assert.Equal(t, "anthropic: the run reached its cap of 2 tool rounds (Options.MaxToolRounds) and the model still calls tools", last.ErrorMessage)
		assert.Equal(t, 1, srv.Pending(), "the third reply is never asked for")

		// The default, and no cap.
		assert.Equal(t, 100, anthropic.DefaultMaxToolRounds)
		for _, rules := range []classify.Rules{classify.Seed, classify.Extended} {
			// A cap whose digits read as a status is still fatal: the type decides.
			m := classify.Message{StopReason: last.StopReason, ErrorType: last.ErrorType,
				ErrorMessage: "anthropic: the run reached its cap of 503 tool rounds (Options.MaxToolRounds) and the model still calls tools"}
			assert.Equal(t, classify.Fatal, rules.Classify(m, time.Now()).Class, rules.String())
		}
	})
}

// Issue item 2: a negative cap is no cap.
func TestToolRoundsUncapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		for i := range 3 {
			srv.Push(providertest.AnthropicMessage{Content: []providertest.AnthropicBlock{
				providertest.AnthropicToolUse(fmt.Sprintf("toolu_%d", i), "read", map[string]any{}),
			}}.Reply())
		}
		srv.Push(text("done"))
		read := anthropic.Tool{Name: "read", Run: func(context.Context, json.RawMessage) (string, error) { return "x", nil }}
		agent := anthropic.New(anthropic.Options{BaseURL: srv.BaseURL(), HTTPClient: srv.Client(),
			Secrets: credentials.EnvSecrets{Lookup: lookup}, Tools: []anthropic.Tool{read}, MaxToolRounds: -1})
		s := newSession(t, agent, fastConfig())
		require.NoError(t, s.Prompt(t.Context(), "loop"))
		assert.Equal(t, "done", lastText(s))
	})
}

// Issue 25 §1: a run calls the model its request names (a session's
// fallback model), and its messages name it.
func TestRunCallsTheRequestsModel(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	srv.Push(providertest.AnthropicMessage{Content: []providertest.AnthropicBlock{providertest.AnthropicText("a")}}.Reply())
	a := newAgent(srv)
	fallback := a.Model()
	fallback.ID = "claude-haiku-4-5"
	var last transcript.Message
	err := a.Run(t.Context(), session.RunRequest{Context: []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hi")}}, Model: fallback},
		func(ev events.Event) {
			if e, ok := ev.(events.MessageEnd); ok {
				last = e.Message
			}
		})
	require.NoError(t, err)
	assert.Equal(t, "claude-haiku-4-5", last.Model)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "claude-haiku-4-5", reqs[0].Body["model"])
}
