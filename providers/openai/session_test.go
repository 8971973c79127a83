package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/agentfsm/agentfsm/internal/providertest"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/providers/openai"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The keys the tests' environment holds; no event, history entry or log
// line may contain one.
var secrets = map[string]string{
	"OPENAI_API_KEY": "sk-default-7f3a9c2e41b8",
	"KEY_A":          "sk-first-5d1e8b7a93c0",
	"KEY_B":          "sk-second-2c6f4e9d18a7",
}

func lookup(name string) (string, bool) {
	v, ok := secrets[name]
	return v, ok
}

// lockedBuffer is a log sink safe for the session's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// harness is a session over the adapter over the fake OpenAI API.
type harness struct {
	fake  *providertest.Server
	agent *openai.Agent
	s     *session.Session
	logs  *lockedBuffer

	mu     sync.Mutex
	events []events.Event
	at     []time.Duration
}

func newHarness(t *testing.T, cfg policy.Config, tools []openai.Tool, opts ...session.Option) *harness {
	t.Helper()
	fake := providertest.NewOpenAI(t)
	h := &harness{fake: fake, logs: &lockedBuffer{}}
	h.agent = openai.New(openai.Options{
		Model:      providertest.OpenAIModel,
		BaseURL:    fake.BaseURL(),
		HTTPClient: fake.Client(),
		Secrets:    credentials.EnvSecrets{Lookup: lookup},
		Tools:      tools,
	})
	logger := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts = append([]session.Option{session.WithModel(h.agent.Model()), session.WithSessionID("openai-test"),
		session.WithConfig(cfg), session.WithLogger(logger)}, opts...)
	s, err := session.New(h.agent, opts...)
	require.NoError(t, err)
	h.s = s
	start := time.Now()
	s.Subscribe(func(ev events.Event) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.events = append(h.events, ev)
		h.at = append(h.at, time.Since(start))
	})
	t.Cleanup(func() {
		s.Close()
		h.checkNoSecret(t)
	})
	return h
}

func (h *harness) recorded() []events.Event {
	synctest.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]events.Event(nil), h.events...)
}

// retries are the session's AutoRetryStart events.
func (h *harness) retries() []events.AutoRetryStart {
	var out []events.AutoRetryStart
	for _, ev := range h.recorded() {
		if r, ok := ev.(events.AutoRetryStart); ok {
			out = append(out, r)
		}
	}
	return out
}

// checkNoSecret fails when a key is in an event, a history entry or a log
// line (issue 13 item 2, scenario 8).
func (h *harness) checkNoSecret(t *testing.T) {
	t.Helper()
	var all strings.Builder
	h.mu.Lock()
	for _, ev := range h.events {
		fmt.Fprintf(&all, "%#v\n%+v\n", ev, ev)
		if b, err := json.Marshal(ev); err == nil {
			all.Write(b)
		}
	}
	h.mu.Unlock()
	for e := range h.s.History().Entries() {
		b, err := json.Marshal(e)
		require.NoError(t, err)
		all.Write(b)
		fmt.Fprintf(&all, "%+v\n", e)
	}
	all.WriteString(h.logs.String())
	for name, key := range secrets {
		assert.NotContains(t, all.String(), key, "the secret of %s leaked", name)
	}
}

func completion(text string) providertest.Reply {
	return providertest.OpenAICompletion{Content: text, Usage: providertest.OpenAIUsage{PromptTokens: 120, CompletionTokens: 8, CachedTokens: 100}}.Reply()
}

func lastAssistant(t *testing.T, s *session.Session) transcript.Message {
	t.Helper()
	msgs := s.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == transcript.RoleAssistant {
			return msgs[i]
		}
	}
	t.Fatal("no assistant message")
	return transcript.Message{}
}

// Issue 13 item 2, scenario 1: a 503 then success is one retry after the
// base delay.
func TestOpenAIServerErrorThenSuccessRetriesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, policy.DefaultConfig(), nil)
		h.fake.Push(providertest.OpenAIServerError(), completion("Hello there."))
		start := time.Now()
		require.NoError(t, h.s.Prompt(context.Background(), "hi"))
		assert.Equal(t, 2*time.Second, time.Since(start), "one wait of the base delay")
		reqs := h.fake.Settled()
		require.Len(t, reqs, 2)
		r := h.retries()
		require.Len(t, r, 1)
		assert.Contains(t, r[0].ErrorMessage, "500 server_error")
		m := lastAssistant(t, h.s)
		assert.Equal(t, "Hello there.", m.Text())
		assert.Equal(t, transcript.StopReasonStop, m.StopReason)
		assert.Equal(t, &transcript.Usage{Input: 20, Output: 8, CacheRead: 100, TotalTokens: 128}, m.Usage)
		assert.Equal(t, "openai", m.Provider)
		assert.Equal(t, providertest.OpenAIModel, m.Model)
		for _, req := range reqs {
			assert.Equal(t, secrets["OPENAI_API_KEY"], req.Key())
			assert.Equal(t, map[string]any{"include_usage": true}, req.Body["stream_options"])
		}
	})
}

// Issue 13 item 2, scenario 2: a 429 rate_limit_exceeded waits for its
// retry-after when the session honours it.
func TestOpenAIRateLimitHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.DefaultConfig()
		cfg.Retry.HonorRetryAfter = true
		h := newHarness(t, cfg, nil)
		h.fake.Push(providertest.OpenAIRateLimit(7*time.Second), completion("ok"))
		start := time.Now()
		require.NoError(t, h.s.Prompt(context.Background(), "hi"))
		assert.Equal(t, 7*time.Second, time.Since(start), "the wait is the hint")
		r := h.retries()
		require.Len(t, r, 1)
		assert.Equal(t, int64(7000), r[0].DelayMs)
		var failed transcript.Message
		for _, ev := range h.recorded() {
			if end, ok := ev.(events.MessageEnd); ok && end.Message.IsError() {
				failed = end.Message
			}
		}
		assert.Equal(t, 429, failed.HTTPStatus)
		assert.Equal(t, "rate_limit_exceeded", failed.ErrorType)
		assert.Equal(t, "7", failed.Headers["retry-after"])
		assert.Equal(t, "0", failed.Headers["x-ratelimit-remaining-requests"])
		assert.NotEmpty(t, failed.Headers["x-request-id"])
		assert.True(t, strings.HasPrefix(failed.ErrorMessage, "429 rate_limit_exceeded: Rate limit reached"), failed.ErrorMessage)
	})
}

// Issue 13 item 2, scenario 3: a 400 context_length_exceeded compacts the
// context and the continuation succeeds.
func TestOpenAIContextLengthExceededCompacts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.DefaultConfig()
		cfg.Compaction.KeepRecentTokens = 5
		h := newHarness(t, cfg, nil)
		h.fake.Push(completion("first answer"), providertest.OpenAIContextLengthExceeded(128000, 130000), completion("recovered"))
		require.NoError(t, h.s.Prompt(context.Background(), "first question, long enough to matter"))
		require.NoError(t, h.s.Prompt(context.Background(), "second question, long enough too"))
		var starts []events.AutoCompactionStart
		for _, ev := range h.recorded() {
			if c, ok := ev.(events.AutoCompactionStart); ok {
				starts = append(starts, c)
			}
		}
		require.Len(t, starts, 1)
		assert.Equal(t, transcript.ReasonOverflow, starts[0].Reason)
		msgs := h.s.Messages()
		assert.Equal(t, transcript.RoleSummary, msgs[0].Role)
		assert.Equal(t, "recovered", lastAssistant(t, h.s).Text())
		reqs := h.fake.Settled()
		require.Len(t, reqs, 3)
		sent := reqs[2].Body["messages"].([]any)
		first := sent[0].(map[string]any)
		assert.Equal(t, "user", first["role"])
		// The digest, cut to the room the overflow's count leaves it.
		assert.Contains(t, first["content"], "compacted into this summary:\n\nSummary of ", "the summary goes first, as a user message")
	})
}

// Issue 13 item 2, scenario 4: a stream cut mid-response (a connection
// reset, an early clean end, an error event) is retried.
func TestOpenAIStreamCutIsRetried(t *testing.T) {
	cases := map[string]func(providertest.Reply) providertest.Reply{
		"connection reset": func(r providertest.Reply) providertest.Reply {
			r.Break = &providertest.Break{After: 3}
			return r
		},
		"clean end without a finish reason": func(r providertest.Reply) providertest.Reply {
			r.Break = &providertest.Break{After: 3, Err: io.EOF}
			return r
		},
		"error event": func(r providertest.Reply) providertest.Reply {
			r.Events = append(r.Events[:3:3], providertest.OpenAIErrorEvent("server_error", "", "The server had an error while processing your request."))
			return r
		},
	}
	for name, cut := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, policy.DefaultConfig(), nil)
				h.fake.Push(cut(completion("a fairly long answer that gets cut")), completion("whole"))
				require.NoError(t, h.s.Prompt(context.Background(), "hi"))
				require.Len(t, h.fake.Settled(), 2)
				r := h.retries()
				require.Len(t, r, 1)
				assert.NotContains(t, r[0].ErrorMessage, "http://", "a short message, not the SDK's dump")
				assert.Equal(t, "whole", lastAssistant(t, h.s).Text())
			})
		})
	}
}

// Issue 13 item 2, scenario 5: a tool call's round trip survives a retry
// of the call that carries its result.
func TestOpenAIToolRoundTripSurvivesRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs []string
		read := openai.Tool{
			Name:        "read",
			Description: "Reads a file.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
			Run: func(_ context.Context, args json.RawMessage) (string, error) {
				runs = append(runs, string(args))
				return "package main", nil
			},
		}
		h := newHarness(t, policy.DefaultConfig(), []openai.Tool{read})
		h.fake.Push(
			providertest.OpenAICompletion{ToolCalls: []providertest.OpenAIToolCall{{ID: "call_1", Name: "read", Arguments: `{"path": "main.go"}`}}}.Reply(),
			providertest.OpenAIOverloaded(),
			completion("It is a Go program."),
		)
		require.NoError(t, h.s.Prompt(context.Background(), "what is main.go?"))
		assert.Equal(t, []string{`{"path":"main.go"}`}, runs, "the tool ran once")
		msgs := h.s.Messages()
		require.Len(t, msgs, 4)
		call := msgs[1]
		assert.Equal(t, transcript.StopReasonToolUse, call.StopReason)
		require.Len(t, call.Content, 1)
		assert.Equal(t, transcript.Block{Type: transcript.BlockToolCall, ID: "call_1", Name: "read", Arguments: json.RawMessage(`{"path":"main.go"}`)}, call.Content[0])
		assert.Equal(t, transcript.RoleToolResult, msgs[2].Role)
		assert.Equal(t, "call_1", msgs[2].ToolCallID)
		assert.Equal(t, "package main", msgs[2].Text())
		assert.Equal(t, "It is a Go program.", msgs[3].Text())

		reqs := h.fake.Settled()
		require.Len(t, reqs, 3)
		assert.Equal(t, reqs[1].Body["messages"], reqs[2].Body["messages"], "the retry sends what the failed call sent")
		sent := reqs[2].Body["messages"].([]any)
		require.Len(t, sent, 3)
		asst := sent[1].(map[string]any)
		tc := asst["tool_calls"].([]any)[0].(map[string]any)
		assert.Equal(t, "call_1", tc["id"])
		assert.Equal(t, `{"path":"main.go"}`, tc["function"].(map[string]any)["arguments"])
		tool := sent[2].(map[string]any)
		assert.Equal(t, "tool", tool["role"])
		assert.Equal(t, "call_1", tool["tool_call_id"])
		assert.Equal(t, "package main", tool["content"])
		tools := reqs[0].Body["tools"].([]any)
		assert.Equal(t, "read", tools[0].(map[string]any)["function"].(map[string]any)["name"])
	})
}

// Issue 13 item 2, scenario 6: an abort mid-stream cancels the request
// and Prompt returns ErrAborted.
func TestOpenAIAbortMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, policy.DefaultConfig(), nil)
		reply := completion("never finished")
		reply.Break = &providertest.Break{After: 2, Stall: true}
		h.fake.Push(reply)
		done := make(chan error, 1)
		go func() { done <- h.s.Prompt(context.Background(), "hi") }()
		time.Sleep(time.Second)
		synctest.Wait()
		require.True(t, h.s.Status().Streaming)
		h.s.Abort()
		require.ErrorIs(t, <-done, policy.ErrAborted)
		reqs := h.fake.Settled()
		require.Len(t, reqs, 1)
		assert.True(t, reqs[0].Cancelled, "the server saw the request cancelled")
		m := lastAssistant(t, h.s)
		assert.Equal(t, transcript.StopReasonAborted, m.StopReason)
		assert.Equal(t, "never ", m.Text(), "what arrived before the abort")
	})
}

// Issue 13 item 2, scenario 7: insufficient_quota switches to the second
// key, and the server sees it.
func TestOpenAIInsufficientQuotaSwitchesKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.DefaultConfig()
		cfg.Retry.Rules = classify.Extended
		store, err := credentials.NewMemoryCredentials(nil,
			policy.Credential{ID: "a", Provider: "openai", Type: "api_key", Secret: "env:KEY_A"},
			policy.Credential{ID: "b", Provider: "openai", Type: "api_key", Secret: "env:KEY_B"},
		)
		if err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, cfg, nil, session.WithCredentials(store))
		h.fake.Push(providertest.OpenAIInsufficientQuota(), completion("paid"))
		start := time.Now()
		require.NoError(t, h.s.Prompt(context.Background(), "hi"))
		assert.Zero(t, time.Since(start), "a switch retries at once")
		reqs := h.fake.Settled()
		require.Len(t, reqs, 2)
		keys := []string{reqs[0].Key(), reqs[1].Key()}
		assert.ElementsMatch(t, []string{secrets["KEY_A"], secrets["KEY_B"]}, keys, "the second request carries the other key")
	})
}

// Issue 13 item 2: a run that cannot resolve its secret returns the error
// and emits nothing; the session reports a failed start.
func TestOpenAIMissingSecretFailsToStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := providertest.NewOpenAI(t)
		agent := openai.New(openai.Options{Model: "gpt-4o", BaseURL: fake.BaseURL(), HTTPClient: fake.Client(),
			Secrets: credentials.EnvSecrets{Lookup: func(string) (string, bool) { return "", false }}})
		var evs []events.Event
		err := agent.Run(context.Background(), session.RunRequest{Context: []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hi")}}},
			func(ev events.Event) { evs = append(evs, ev) })
		require.ErrorIs(t, err, credentials.ErrNoSecret)
		assert.Empty(t, evs)
		assert.Empty(t, fake.Requests())

		s, err := session.New(agent, session.WithModel(agent.Model()))
		require.NoError(t, err)
		defer s.Close()
		require.ErrorIs(t, s.Prompt(context.Background(), "hi"), policy.ErrStartFailed)
	})
}

// Issue 13 item 2: a stream that stalls past the idle timeout is a
// transient failure, retried; the stalled request is cancelled.
func TestOpenAIIdleStreamIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, policy.DefaultConfig(), nil)
		stalled := completion("stalls here")
		stalled.Break = &providertest.Break{After: 2, Stall: true}
		h.fake.Push(stalled, completion("whole"))
		start := time.Now()
		require.NoError(t, h.s.Prompt(context.Background(), "hi"))
		assert.Equal(t, openai.DefaultIdleTimeout+2*time.Second, time.Since(start), "the idle timeout, then the base delay")
		reqs := h.fake.Settled()
		require.Len(t, reqs, 2)
		assert.True(t, reqs[0].Cancelled)
		r := h.retries()
		require.Len(t, r, 1)
		assert.Equal(t, "openai: timed out: no data from the server for 5m0s (Options.IdleTimeout)", r[0].ErrorMessage)
	})
}

// Issue 13 item 2: Prompt's context deadline ends a stalled call; the
// request is cancelled and Prompt returns ErrAborted with the deadline.
func TestOpenAIPromptDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, policy.DefaultConfig(), nil)
		stalled := completion("stalls here")
		stalled.Break = &providertest.Break{After: 1, Stall: true}
		h.fake.Push(stalled)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := h.s.Prompt(ctx, "hi")
		require.ErrorIs(t, err, policy.ErrAborted)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		reqs := h.fake.Settled()
		require.Len(t, reqs, 1)
		assert.True(t, reqs[0].Cancelled)
		assert.Equal(t, transcript.StopReasonAborted, lastAssistant(t, h.s).StopReason)
	})
}

// Issue item 1: after insufficient_quota switched the session to the
// other key, an overflow's model summary is asked with that key, not the
// default one.
func TestOpenAISummaryFollowsKeySwitch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.DefaultConfig()
		cfg.Retry.Rules = classify.Extended
		cfg.Compaction.KeepRecentTokens = 5
		store, err := credentials.NewMemoryCredentials(nil,
			policy.Credential{ID: "a", Provider: "openai", Type: "api_key", Secret: "env:KEY_A"},
			policy.Credential{ID: "b", Provider: "openai", Type: "api_key", Secret: "env:KEY_B"},
		)
		if err != nil {
			t.Fatal(err)
		}
		// The summarizer's agent is a second adapter on the same server,
		// with no tools.
		var summarizer session.AgentSummarizer
		h := newHarness(t, cfg, nil, session.WithCredentials(store), session.WithSummarizer(&summarizer))
		summarizer.Agent = openai.New(openai.Options{Model: providertest.OpenAIModel, BaseURL: h.fake.BaseURL(),
			HTTPClient: h.fake.Client(), Secrets: credentials.EnvSecrets{Lookup: lookup}})
		h.fake.Push(completion("first answer"), providertest.OpenAIInsufficientQuota(),
			providertest.OpenAIContextLengthExceeded(128000, 130000), completion("## Goal\nAnswer the questions."), completion("recovered"))
		require.NoError(t, h.s.Prompt(context.Background(), "first question, long enough to matter"))
		require.NoError(t, h.s.Prompt(context.Background(), "second question, long enough too"))
		assert.Equal(t, "recovered", lastAssistant(t, h.s).Text())
		// The model's answer, cut to the room the overflow's count leaves
		// the summary (docs/session.md, "Calibration").
		assert.True(t, strings.HasPrefix("## Goal\nAnswer the questions.", h.s.Messages()[0].Text()), h.s.Messages()[0].Text())
		assert.NotEmpty(t, h.s.Messages()[0].Text())
		reqs := h.fake.Settled()
		require.Len(t, reqs, 5)
		assert.NotEqual(t, reqs[1].Key(), reqs[2].Key(), "the usage limit switched keys")
		assert.Contains(t, string(reqs[3].Raw), "first question", "the summary request")
		assert.Equal(t, reqs[2].Key(), reqs[3].Key(), "the summary is asked with the key switched to")
		assert.Equal(t, reqs[2].Key(), reqs[4].Key())
		assert.Equal(t, providertest.OpenAIModel, reqs[3].Body["model"])
	})
}

// Issue item 2: a model that keeps calling tools ends the run at the cap
// of tool rounds, with a fatal error naming the cap: the session does not
// retry it, and no model call goes out past the cap.
func TestOpenAIToolRoundsCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := providertest.NewOpenAI(t)
		again := func(i int) providertest.Reply {
			return providertest.OpenAICompletion{ToolCalls: []providertest.OpenAIToolCall{{ID: fmt.Sprintf("call_%d", i), Name: "read", Arguments: `{}`}}}.Reply()
		}
		fake.Push(again(1), again(2), again(3), again(4))
		runs := 0
		read := openai.Tool{Name: "read", Run: func(context.Context, json.RawMessage) (string, error) {
			runs++
			return "package main", nil
		}}
		agent := openai.New(openai.Options{Model: providertest.OpenAIModel, BaseURL: fake.BaseURL(), HTTPClient: fake.Client(),
			Secrets: credentials.EnvSecrets{Lookup: lookup}, Tools: []openai.Tool{read}, MaxToolRounds: 3})
		s, err := session.New(agent, session.WithModel(agent.Model()))
		require.NoError(t, err)
		defer s.Close()
		var retried bool
		s.Subscribe(func(ev events.Event) {
			_, ok := ev.(events.AutoRetryStart)
			retried = retried || ok
		})
		err = s.Prompt(context.Background(), "loop")
		require.ErrorIs(t, err, policy.ErrProvider)
		assert.ErrorContains(t, err, "cap of 3 tool rounds")
		assert.Equal(t, 3, runs)
		assert.Len(t, fake.Settled(), 3, "no model call past the cap")
		synctest.Wait()
		assert.False(t, retried, "not retried")
		last := lastAssistant(t, s)
		assert.Equal(t, openai.ErrorTypeToolRounds, last.ErrorType)
		assert.Equal(t, "openai: the run reached its cap of 3 tool rounds (Options.MaxToolRounds) and the model still calls tools", last.ErrorMessage)
		assert.Equal(t, 100, openai.DefaultMaxToolRounds)
	})
}
