package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/providertest"
	"github.com/agentfsm/agentfsm/session/rpc"
)

// These tests run "agentfsm chat" against each provider's fake on a real
// loopback server, as chat_binary_test.go does, for the recovery paths
// that involve the provider's own wire: a retry hint, a tool round trip, a
// key switch and a turn's deadline.

// TestChatBinaryRetryAfterHonoured: a 429 whose retry-after-ms says 200 ms
// is retried no earlier than that, though the base delay is 1 ms. Issue
// item 6.
func TestChatBinaryRetryAfterHonoured(t *testing.T) {
	const hint = 200 * time.Millisecond
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			api.srv.Push(api.rateLimit(hint), api.ok("Waited."))
			settings := `{"retry":{"baseDelayMs":1,"honorRetryAfter":true}}`
			code, out, errOut := runChatCmd(t, api.chatCmdWith(t, guard(t), settings, "--events", "hi"), "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "Waited.\n", out)
			var start *events.AutoRetryStart
			for _, ev := range eventLines(t, errOut) {
				v, err := ev.Value()
				require.NoError(t, err)
				if e, ok := v.(events.AutoRetryStart); ok {
					start = &e
				}
			}
			require.NotNil(t, start)
			assert.Equal(t, hint.Milliseconds(), start.DelayMs, "the delay is the hint")
			reqs := api.srv.Requests()
			require.Len(t, reqs, 2)
			assert.GreaterOrEqual(t, reqs[1].Received.Sub(reqs[0].Received), hint, "the server sees the retry no earlier than the hint")
		})
	}
}

// TestChatBinaryToolRoundTripSurvivesRetry: with --tools the model reads a
// file of the working directory (and is refused one outside it, as a
// failed tool result); the call that carries the results is overloaded,
// retried with the same messages, and answered. Issue item 6.
func TestChatBinaryToolRoundTripSurvivesRetry(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "work")
			require.NoError(t, os.Mkdir(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the launch is on Tuesday"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(parent, "secret.txt"), []byte("TOP-SECRET-CONTENT"), 0o644))
			require.NoError(t, os.Symlink(filepath.Join(parent, "secret.txt"), filepath.Join(dir, "link.txt")))
			api.srv.Push(api.toolCalls(
				providertest.OpenAIToolCall{ID: "call_1", Name: "read", Arguments: `{"path":"notes.txt"}`},
				providertest.OpenAIToolCall{ID: "call_2", Name: "read", Arguments: `{"path":"../secret.txt"}`},
				providertest.OpenAIToolCall{ID: "call_3", Name: "read", Arguments: `{"path":"link.txt"}`},
				providertest.OpenAIToolCall{ID: "call_4", Name: "list", Arguments: `{}`},
			), api.transient(), api.ok("On Tuesday."))
			cmd := api.chatCmd(t, guard(t), "--tools", "when is the launch?")
			cmd.Dir = dir
			code, out, errOut := runChatCmd(t, cmd, "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "On Tuesday.\n", out)
			reqs := api.srv.Requests()
			require.Len(t, reqs, 3)
			assert.Contains(t, string(reqs[0].Raw), `"read"`, "the tools are offered")
			assert.Equal(t, reqs[1].Body["messages"], reqs[2].Body["messages"], "the retry sends the round trip again")
			sent := string(reqs[2].Raw)
			assert.Contains(t, sent, "the launch is on Tuesday")
			assert.Contains(t, sent, `\"../secret.txt\" is outside the working directory`)
			assert.Contains(t, sent, `\"link.txt\" is outside the working directory`, "a link out is refused too")
			assert.Contains(t, sent, `link.txt\nnotes.txt`, "the listing")
			assert.NotContains(t, sent, "TOP-SECRET-CONTENT")
		})
	}
}

// TestChatBinaryUsageLimitSwitchesKey: the settings name two credentials,
// each by the environment variable of its key; a usage limit switches to
// the other one, whose key the server sees. No key is written to stdout,
// the event lines or the history. Issue items 5 and 6.
func TestChatBinaryUsageLimitSwitchesKey(t *testing.T) {
	const keyA, keyB = "sk-first-5d1e8b7a93c0", "sk-second-2c6f4e9d18a7"
	settings := `{"retry":{"baseDelayMs":1,"rules":"extended"},
		"credentials":[{"id":"first","type":"api_key","env":"TEAM_KEY_A"},{"id":"second","env":"TEAM_KEY_B"}]}`
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			history := filepath.Join(t.TempDir(), "chat.jsonl")
			api.srv.Push(api.usageLimit(), api.ok("Paid for."))
			cmd := api.chatCmdWith(t, guard(t), settings, "--events", "--history", history, "hi")
			cmd.Env = append(cleanEnv(), "TEAM_KEY_A="+keyA, "TEAM_KEY_B="+keyB)
			code, out, errOut := runChatCmd(t, cmd, "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "Paid for.\n", out)
			reqs := api.srv.Requests()
			require.Len(t, reqs, 2)
			assert.NotEqual(t, reqs[0].Key(), reqs[1].Key(), "the usage limit switched keys")
			assert.ElementsMatch(t, []string{keyA, keyB}, []string{reqs[0].Key(), reqs[1].Key()})
			file, err := os.ReadFile(history)
			require.NoError(t, err)
			for where, text := range map[string]string{"stdout": out, "events": errOut, "history": string(file)} {
				for _, key := range []string{keyA, keyB} {
					assert.NotContains(t, text, key, where)
				}
			}
			assert.Contains(t, errOut, `"type":"auto_retry_start"`)

			// A credential whose variable is not set is a usage error that
			// names it, before any request.
			cmd = api.chatCmdWith(t, guard(t), settings, "hi")
			cmd.Env = append(cleanEnv(), "TEAM_KEY_A="+keyA)
			code, _, errOut = runChatCmd(t, cmd, "")
			assert.Equal(t, 2, code)
			assert.Equal(t, "agentfsm chat: --settings: credential \"second\": the environment variable TEAM_KEY_B is not set\n", errOut)
			assert.Len(t, api.srv.Requests(), 2)
		})
	}
}

// TestChatBinaryTimeout: --timeout ends a turn whose answer stalls: the
// request is cancelled and the command exits 1 with the turn's error.
// Issue items 5 and 6.
func TestChatBinaryTimeout(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			stalled := api.ok("an answer that stalls")
			stalled.Break = &providertest.Break{After: 2, Stall: true}
			api.srv.Push(stalled)
			start := time.Now()
			code, out, errOut := runChatCmd(t, api.chatCmd(t, guard(t), "--timeout", "300ms", "hi"), "")
			assert.Equal(t, 1, code)
			assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
			assert.Empty(t, out)
			assert.Equal(t, "agentfsm chat: the turn ran past --timeout 300ms; policy: aborted: context deadline exceeded\n", errOut)
			reqs := api.srv.Settled()
			require.Len(t, reqs, 1)
			assert.True(t, reqs[0].Cancelled, "the server saw the request cancelled")
		})
	}
	api := fakeAPIs(t)[0]
	code, _, errOut := runChatCmd(t, api.chatCmd(t, guard(t), "--timeout", "-1s", "hi"), "")
	assert.Equal(t, 2, code)
	assert.Equal(t, "agentfsm chat: --timeout must not be negative, got -1s\n", errOut)
	code, _, errOut = runChatCmd(t, api.chatCmd(t, guard(t), "--timeout", "soon", "hi"), "")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `invalid value "soon" for flag -timeout`)
}

// syncBuffer is a writer safe for the child's stderr copier and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRPCBinaryCredentialsSwitchKey: "agentfsm rpc --provider" takes the
// settings' credentials too: a usage limit switches keys, and no key is in
// an event, a message or the server's log. Issue item 5.
func TestRPCBinaryCredentialsSwitchKey(t *testing.T) {
	const keyA, keyB = "sk-first-5d1e8b7a93c0", "sk-second-2c6f4e9d18a7"
	t.Setenv("TEAM_KEY_A", keyA) // the child's environment
	t.Setenv("TEAM_KEY_B", keyB)
	settings := writeFile(t, "s.json", `{"retry":{"baseDelayMs":1,"rules":"extended"},
		"credentials":[{"id":"first","env":"TEAM_KEY_A"},{"id":"second","env":"TEAM_KEY_B"}]}`)
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			ctx := guard(t)
			api.srv.Push(api.usageLimit(), api.ok("Served."))
			var logs syncBuffer
			c, err := rpc.Start(binary(t), &logs, "rpc", "--provider", api.name, "--base-url", api.baseURL, "--settings", settings)
			require.NoError(t, err)
			require.NoError(t, c.Prompt(ctx, "hi"))
			require.NoError(t, c.WaitForIdle(ctx))
			var events strings.Builder
			for _, ev := range eventsUntilSettled(t, ctx, c) {
				events.Write(ev.Raw)
			}
			msgs, err := c.GetMessages(ctx)
			require.NoError(t, err)
			assert.Equal(t, "Served.", answer(msgs))
			raw, err := json.Marshal(msgs)
			require.NoError(t, err)
			require.NoError(t, c.Close())
			reqs := api.srv.Requests()
			require.Len(t, reqs, 2)
			assert.ElementsMatch(t, []string{keyA, keyB}, []string{reqs[0].Key(), reqs[1].Key()}, "the usage limit switched keys")
			assert.Contains(t, events.String(), "auto_retry_start")
			for where, text := range map[string]string{"events": events.String(), "messages": string(raw), "log": logs.String()} {
				for _, key := range []string{keyA, keyB} {
					assert.NotContains(t, text, key, where)
				}
			}
		})
	}
}

// TestRPCBinaryProviderSummarizer: "agentfsm rpc --provider" summarizes
// with the model by default (one more request, whose answer is the
// summary), and with the digest under --summarizer digest. Issue 23
// item 4.
func TestRPCBinaryProviderSummarizer(t *testing.T) {
	settings := writeFile(t, "s.json", msSettings)
	for _, c := range []struct {
		name  string
		args  []string
		model bool
	}{
		{"default", nil, true},
		{"digest", []string{"--summarizer", "digest"}, false},
	} {
		for _, api := range fakeAPIs(t) {
			t.Run(c.name+"/"+api.name, func(t *testing.T) {
				ctx := guard(t)
				t.Setenv(api.keyVar, "test-key") // the child's environment
				replies := []providertest.Reply{api.ok("Seven open questions."), api.overflow()}
				if c.model {
					replies = append(replies, api.ok("Goal: answer the open questions."))
				}
				api.srv.Push(append(replies, api.ok("Here are the drafts."))...)
				args := append([]string{"rpc", "--provider", api.name, "--base-url", api.baseURL, "--settings", settings}, c.args...)
				cl, err := rpc.Start(binary(t), os.Stderr, args...)
				require.NoError(t, err)
				t.Cleanup(func() { assert.NoError(t, cl.Close()) })
				for _, p := range []string{"list the open questions", "now draft answers"} {
					require.NoError(t, cl.Prompt(ctx, p))
					require.NoError(t, cl.WaitForIdle(ctx))
				}
				msgs, err := cl.GetMessages(ctx)
				require.NoError(t, err)
				require.NotEmpty(t, msgs)
				assert.Equal(t, "Here are the drafts.", answer(msgs))
				summary := msgs[0].Text()
				reqs := api.srv.Requests()
				if !c.model {
					assert.True(t, strings.HasPrefix(summary, "Summary of "), "the digest: %q", summary)
					assert.Len(t, reqs, 3, "no request for the summary")
					return
				}
				// The model's answer is the summary, cut to the room the
				// overflow's count leaves it (docs/session.md, "Calibration").
				assert.NotEmpty(t, summary)
				assert.True(t, strings.HasPrefix("Goal: answer the open questions.", summary), "the model's answer is the summary: %q", summary)
				require.Len(t, reqs, 4)
				assert.Contains(t, string(reqs[2].Raw), "list the open questions", "the summary request holds the transcript")
			})
		}
	}
}

// TestChatBinaryRidesOutAnOutage: issue 24 §1. The provider is overloaded
// for eight requests, then answers. With no count limit and a time budget
// (the patient preset's shape, in milliseconds so the test is quick) the
// chat rides it out, each auto_retry_start showing the budget; with the
// reference's count of three retries it gives up after four requests, and
// its auto_retry_start lines carry no budget fields.
func TestChatBinaryRidesOutAnOutage(t *testing.T) {
	const outage = 8
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			push := func() {
				for range outage {
					api.srv.Push(api.transient())
				}
				api.srv.Push(api.ok("Back."))
			}
			push()
			budget := `{"retry":{"maxRetries":-1,"maxElapsedMs":60000,"baseDelayMs":1,"maxDelayMs":4}}`
			code, out, errOut := runChatCmd(t, api.chatCmdWith(t, guard(t), budget, "--events", "hi"), "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "Back.\n", out)
			assert.Len(t, api.srv.Requests(), outage+1)
			var starts []events.AutoRetryStart
			var end *events.AutoRetryEnd
			for _, ev := range eventLines(t, errOut) {
				v, err := ev.Value()
				require.NoError(t, err)
				switch e := v.(type) {
				case events.AutoRetryStart:
					starts = append(starts, e)
					if e.Attempt == 1 {
						assert.Contains(t, string(ev.Raw), `"elapsedMs":0,"maxElapsedMs":60000,"remainingMs":60000`)
					}
				case events.AutoRetryEnd:
					end = &e
				}
			}
			require.Len(t, starts, outage)
			for i, s := range starts {
				assert.Equal(t, i+1, s.Attempt)
				assert.Equal(t, -1, s.MaxAttempts)
				assert.Equal(t, int64(60000), s.MaxElapsedMs)
				assert.Equal(t, s.MaxElapsedMs-s.ElapsedMs, s.RemainingMs)
				assert.LessOrEqual(t, s.DelayMs, int64(4), "delays capped at maxDelayMs")
			}
			assert.Equal(t, &events.AutoRetryEnd{Success: true, Attempt: outage, Outcome: events.RetryRecovered}, end)

			// The reference's count, in milliseconds: three retries, then
			// the turn fails.
			push()
			before := len(api.srv.Requests())
			code, _, errOut = runChatCmd(t, api.chatCmdWith(t, guard(t), `{"retry":{"baseDelayMs":1}}`, "--events", "hi"), "")
			assert.NotEqual(t, 0, code)
			assert.Len(t, api.srv.Requests(), before+4)
			assert.Contains(t, errOut, "retries exhausted after 3 attempts")
			assert.Contains(t, errOut, `"outcome":"exhausted","errorClass":"retryable","limit":"retries"`)
			assert.NotContains(t, errOut, "maxElapsedMs")
		})
	}
}

// TestChatBinaryBudgetEndsTheChain: issue 24 §1. An outage longer than the
// budget ends the chain as exhausted, naming the budget, before the count
// (none) would.
func TestChatBinaryBudgetEndsTheChain(t *testing.T) {
	api := newFakeAnthropic(t)
	for range 50 {
		api.srv.Push(api.transient())
	}
	// 200 ms delays against a 500 ms budget: two retries (0 + 200, 200
	// and a little + 200 fit; 400 and more + 200 do not).
	budget := `{"retry":{"maxRetries":-1,"maxElapsedMs":500,"baseDelayMs":200,"maxDelayMs":200}}`
	code, _, errOut := runChatCmd(t, api.chatCmdWith(t, guard(t), budget, "--events", "hi"), "")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, `"outcome":"exhausted","errorClass":"retryable","limit":"elapsed"`)
	assert.Contains(t, errOut, "would end past the time budget of 500ms")
	assert.LessOrEqual(t, len(api.srv.Requests()), 3)
}

// TestChatBinaryModelFallback: issue 25 §1. A model that answers only 529
// (Anthropic's overloaded_error, OpenAI's 503 "overloaded") and a fallback
// model that answers: the turn succeeds on the fallback, whose request
// names it, with a model_fallback event, and stderr says so in words
// without --events; with fallback.after "overloaded" at the first
// overload; without the fallback setting the turn fails as before.
func TestChatBinaryModelFallback(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			modelOf := func(r providertest.Request) string { s, _ := r.Body["model"].(string); return s }
			// After exhaustion: the primary's chain (one try, two retries)
			// then the fallback.
			for range 3 {
				api.srv.Push(api.transient())
			}
			api.srv.Push(api.ok("From the fallback."))
			settings := `{"retry":{"baseDelayMs":1,"maxRetries":2},"fallback":{"models":["fallback-model"]}}`
			code, out, errOut := runChatCmd(t, api.chatCmdWith(t, guard(t), settings, "--events", "hi"), "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "From the fallback.\n", out)
			reqs := api.srv.Requests()
			require.Len(t, reqs, 4)
			primary := modelOf(reqs[0])
			require.NotEmpty(t, primary)
			for _, r := range reqs[:3] {
				assert.Equal(t, primary, modelOf(r), "the chain runs on the primary")
			}
			assert.Equal(t, "fallback-model", modelOf(reqs[3]), "the request after the switch names the fallback")
			var fallback *events.ModelFallback
			var answered string
			for _, ev := range eventLines(t, errOut) {
				v, err := ev.Value()
				require.NoError(t, err)
				switch e := v.(type) {
				case events.ModelFallback:
					fallback = &e
				case events.MessageEnd:
					if e.Message.StopReason == "stop" {
						answered = e.Message.Model
					}
				}
			}
			require.NotNil(t, fallback, errOut)
			assert.Equal(t, primary, fallback.From)
			assert.Equal(t, "fallback-model", fallback.To)
			assert.Equal(t, events.FallbackExhausted, fallback.Reason)
			assert.False(t, fallback.Until.IsZero())
			assert.Equal(t, "fallback-model", answered, "the answer names the model that gave it")

			// After the first overload, said in words.
			before := len(api.srv.Requests())
			api.srv.Push(api.transient(), api.ok("From the fallback."))
			settings = `{"retry":{"baseDelayMs":1},"fallback":{"models":["fallback-model"],"after":"overloaded"}}`
			code, out, errOut = runChatCmd(t, api.chatCmdWith(t, guard(t), settings, "hi"), "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "From the fallback.\n", out)
			reqs = api.srv.Requests()[before:]
			require.Len(t, reqs, 2)
			assert.Equal(t, "fallback-model", modelOf(reqs[1]))
			assert.Contains(t, errOut, "agentfsm chat: Model "+primary+" is overloaded: switching to fallback-model until ")

			// Without the setting: the turn fails as it did.
			before = len(api.srv.Requests())
			for range 3 {
				api.srv.Push(api.transient())
			}
			code, _, errOut = runChatCmd(t, api.chatCmdWith(t, guard(t), `{"retry":{"baseDelayMs":1,"maxRetries":2}}`, "--events", "hi"), "")
			assert.NotEqual(t, 0, code)
			assert.Len(t, api.srv.Requests(), before+3)
			assert.Contains(t, errOut, "retries exhausted after 2 attempts")
			assert.NotContains(t, errOut, "model_fallback")
		})
	}
}
