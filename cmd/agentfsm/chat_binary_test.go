package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/providertest"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/rpc"
)

// These tests run "agentfsm chat" and "agentfsm rpc --provider" as a
// separate process against a fake of each provider's API on a real
// loopback server, with delays of a millisecond.

// msSettings are settings whose retry delays are a millisecond and whose
// compaction keeps only the latest few tokens.
const msSettings = `{"retry":{"baseDelayMs":1},"compaction":{"keepRecentTokens":5}}`

// fakeAPI is one provider's fake API on a loopback server, with the
// replies a test needs in that provider's wire format.
type fakeAPI struct {
	name      string
	keyVar    string
	srv       *providertest.Server
	baseURL   string
	ok        func(text string) providertest.Reply
	transient func() providertest.Reply
	overflow  func() providertest.Reply
	badKey    func() providertest.Reply
	// rateLimit is a 429 whose retry-after-ms header is the hint.
	rateLimit func(hint time.Duration) providertest.Reply
	// usageLimit is the provider's usage limit of an account.
	usageLimit func() providertest.Reply
	// toolCalls asks for tools, a call of name with args per entry.
	toolCalls func(calls ...providertest.OpenAIToolCall) providertest.Reply
}

func fakeAPIs(t *testing.T) []fakeAPI {
	return []fakeAPI{newFakeAnthropic(t), newFakeOpenAI(t)}
}

func newFakeAnthropic(t *testing.T) fakeAPI {
	srv := providertest.NewAnthropic(t)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return fakeAPI{
		name: "anthropic", keyVar: "ANTHROPIC_API_KEY", srv: srv, baseURL: ts.URL,
		ok: func(text string) providertest.Reply {
			return providertest.AnthropicMessage{Content: []providertest.AnthropicBlock{providertest.AnthropicText(text)}}.Reply()
		},
		transient: providertest.AnthropicOverloaded,
		overflow:  func() providertest.Reply { return providertest.AnthropicPromptTooLong(213462, 200000) },
		badKey: func() providertest.Reply {
			return providertest.AnthropicError(401, "authentication_error", "invalid x-api-key")
		},
		rateLimit: func(hint time.Duration) providertest.Reply {
			r := providertest.AnthropicRateLimit(hint, time.Now())
			r.Header.Set("Retry-After-Ms", strconv.FormatInt(hint.Milliseconds(), 10))
			return r
		},
		usageLimit: providertest.AnthropicCreditBalanceTooLow,
		toolCalls: func(calls ...providertest.OpenAIToolCall) providertest.Reply {
			var blocks []providertest.AnthropicBlock
			for _, c := range calls {
				var input map[string]any
				if err := json.Unmarshal([]byte(c.Arguments), &input); err != nil {
					panic(err)
				}
				blocks = append(blocks, providertest.AnthropicToolUse(c.ID, c.Name, input))
			}
			return providertest.AnthropicMessage{Content: blocks}.Reply()
		},
	}
}

func newFakeOpenAI(t *testing.T) fakeAPI {
	srv := providertest.NewOpenAI(t)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return fakeAPI{
		name: "openai", keyVar: "OPENAI_API_KEY", srv: srv, baseURL: ts.URL + "/v1/",
		ok:        func(text string) providertest.Reply { return providertest.OpenAICompletion{Content: text}.Reply() },
		transient: providertest.OpenAIOverloaded,
		overflow:  func() providertest.Reply { return providertest.OpenAIContextLengthExceeded(128000, 130000) },
		badKey:    func() providertest.Reply { return providertest.OpenAIInvalidAPIKey("test-key") },
		rateLimit: func(hint time.Duration) providertest.Reply {
			r := providertest.OpenAIRateLimit(hint)
			r.Header.Set("Retry-After-Ms", strconv.FormatInt(hint.Milliseconds(), 10))
			return r
		},
		usageLimit: providertest.OpenAIInsufficientQuota,
		toolCalls: func(calls ...providertest.OpenAIToolCall) providertest.Reply {
			return providertest.OpenAICompletion{ToolCalls: calls}.Reply()
		},
	}
}

// cleanEnv is the test's environment without any provider key.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANTHROPIC_") && !strings.HasPrefix(kv, "OPENAI_") {
			env = append(env, kv)
		}
	}
	return env
}

// chatCmd returns "agentfsm chat" against api with its key set, args
// after the provider's flags.
func (api fakeAPI) chatCmd(t *testing.T, ctx context.Context, args ...string) *exec.Cmd {
	return api.chatCmdWith(t, ctx, msSettings, args...)
}

// chatCmdWith is chatCmd with these settings.
func (api fakeAPI) chatCmdWith(t *testing.T, ctx context.Context, settings string, args ...string) *exec.Cmd {
	args = append([]string{"chat", "--provider", api.name, "--base-url", api.baseURL,
		"--settings", writeFile(t, "settings.json", settings)}, args...)
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = append(cleanEnv(), api.keyVar+"=test-key")
	return cmd
}

// runChat runs cmd with stdin and returns its exit code and outputs.
func runChatCmd(t *testing.T, cmd *exec.Cmd, stdin string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), out.String(), errOut.String()
	}
	require.NoError(t, err)
	return 0, out.String(), errOut.String()
}

// eventLines decodes the JSON event lines of --events.
func eventLines(t *testing.T, stderr string) []rpc.Event {
	t.Helper()
	var evs []rpc.Event
	for line := range strings.Lines(stderr) {
		var head struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &head), "stderr holds event lines only: %q", line)
		evs = append(evs, rpc.Event{Type: head.Type, Raw: []byte(strings.TrimSpace(line))})
	}
	return evs
}

// TestChatBinaryAnswers: a prompt in the arguments, one turn, the answer on
// stdout and nothing on stderr; the key reaches the server. Issue item 4.
func TestChatBinaryAnswers(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			api.srv.Push(api.ok("Paris is the capital."))
			code, out, errOut := runChatCmd(t, api.chatCmd(t, guard(t), "What", "is the capital of France?"), "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "Paris is the capital.\n", out)
			assert.Empty(t, errOut)
			reqs := api.srv.Requests()
			require.Len(t, reqs, 1)
			assert.Equal(t, "test-key", reqs[0].Key())
			assert.Contains(t, string(reqs[0].Raw), "What is the capital of France?")
		})
	}
}

// TestChatBinaryRetriesWithEvents: an overloaded provider twice, then an
// answer: the session retries, and --events shows every event as the RPC
// server's line. Issue item 4.
func TestChatBinaryRetriesWithEvents(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			api.srv.Push(api.transient(), api.transient(), api.ok("Done."))
			code, out, errOut := runChatCmd(t, api.chatCmd(t, guard(t), "--events", "hi"), "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "Done.\n", out)
			var starts []events.AutoRetryStart
			var end *events.AutoRetryEnd
			evs := eventLines(t, errOut)
			for _, ev := range evs {
				v, err := ev.Value()
				require.NoError(t, err, ev.Type)
				switch e := v.(type) {
				case events.AutoRetryStart:
					starts = append(starts, e)
				case events.AutoRetryEnd:
					end = &e
				}
			}
			require.Len(t, starts, 2)
			assert.Equal(t, 1, starts[0].Attempt)
			assert.Equal(t, int64(1), starts[0].DelayMs)
			assert.Contains(t, starts[0].ErrorMessage, map[string]string{"anthropic": "529", "openai": "503"}[api.name])
			assert.Equal(t, &events.AutoRetryEnd{Success: true, Attempt: 2, Outcome: events.RetryRecovered}, end)
			assert.Equal(t, "turn_settled", evs[len(evs)-1].Type)
			assert.NotContains(t, errOut, "test-key", "no secret in an event")
			assert.Len(t, api.srv.Requests(), 3)
		})
	}
}

// TestChatBinaryModelSummarizer: by default, and with --summarizer model,
// the overflow's compaction asks the model for the summary (one more
// request, whose answer is the summary), then continues; --summarizer
// digest writes it locally, with no request. Issue 23 item 4.
func TestChatBinaryModelSummarizer(t *testing.T) {
	for _, c := range []struct {
		name  string
		args  []string
		model bool
	}{
		{"default", nil, true},
		{"model", []string{"--summarizer", "model"}, true},
		{"digest", []string{"--summarizer", "digest"}, false},
	} {
		for _, api := range fakeAPIs(t) {
			t.Run(c.name+"/"+api.name, func(t *testing.T) {
				replies := []providertest.Reply{api.ok("Seven open questions, by section."), api.overflow()}
				if c.model {
					replies = append(replies, api.ok("Goal: answer the open questions."))
				}
				api.srv.Push(append(replies, api.ok("Here are the drafts."))...)
				stdin := "read the design notes and list the open questions\nnow draft answers to every question\n"
				code, out, errOut := runChatCmd(t, api.chatCmd(t, guard(t), append([]string{"--events"}, c.args...)...), stdin)
				require.Equal(t, 0, code, errOut)
				assert.Equal(t, "Seven open questions, by section.\nHere are the drafts.\n", out)
				var summary string
				for _, ev := range eventLines(t, errOut) {
					v, err := ev.Value()
					require.NoError(t, err, ev.Type)
					if e, ok := v.(events.AutoCompactionEnd); ok && e.Result != nil {
						summary = e.Result.Summary
					}
				}
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
				assert.Contains(t, string(reqs[2].Raw), "read the design notes", "the summary request holds the transcript")
			})
		}
	}
	code, _, errOut := runChatCmd(t, fakeAPIs(t)[0].chatCmd(t, guard(t), "--summarizer", "oracle", "hi"), "")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `--summarizer "oracle": want digest or model`)
}

// TestChatBinaryCutStreamIsRetried: a stream cut mid-answer (a reset) is a
// transient failure: the command retries and prints the whole answer.
// Issue item 5.
func TestChatBinaryCutStreamIsRetried(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			cut := api.ok("an answer that never arrives whole")
			cut.Break = &providertest.Break{After: 2}
			api.srv.Push(cut, api.ok("The whole answer."))
			code, out, errOut := runChatCmd(t, api.chatCmd(t, guard(t), "--events", "hi"), "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "The whole answer.\n", out)
			var retried bool
			for _, ev := range eventLines(t, errOut) {
				retried = retried || ev.Type == "auto_retry_start"
			}
			assert.True(t, retried, "the cut stream was retried")
			assert.Len(t, api.srv.Requests(), 2)
		})
	}
}

// TestChatBinaryOverflowCompacts: prompts on stdin are one conversation;
// the second overflows the context: the session compacts (with the digest,
// which asks nothing) and continues.
// Issue item 4.
func TestChatBinaryOverflowCompacts(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			api.srv.Push(api.ok("Seven open questions, by section."), api.overflow(), api.ok("Here are the drafts."))
			stdin := "read the design notes and list the open questions\n\n  \nnow draft answers to every question\n"
			code, out, errOut := runChatCmd(t, api.chatCmd(t, guard(t), "--events", "--summarizer", "digest"), stdin)
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "Seven open questions, by section.\nHere are the drafts.\n", out)
			var types []string
			var end events.AutoCompactionEnd
			for _, ev := range eventLines(t, errOut) {
				types = append(types, ev.Type)
				if ev.Type == "auto_compaction_end" {
					v, err := ev.Value()
					require.NoError(t, err)
					end = v.(events.AutoCompactionEnd)
				}
			}
			assert.Contains(t, strings.Join(types, " "), "auto_compaction_start state_change auto_compaction_end")
			require.NotNil(t, end.Result)
			assert.True(t, end.WillRetry)
			reqs := api.srv.Requests()
			require.Len(t, reqs, 3)
			assert.Contains(t, string(reqs[2].Raw), "now draft answers", "the continuation asks the question again")
		})
	}
}

// TestChatBinaryHistoryResumes: a second invocation on the same --history
// file carries on the first one's conversation. Issue item 4.
func TestChatBinaryHistoryResumes(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			history := t.TempDir() + "/chat.jsonl"
			api.srv.Push(api.ok("The first answer."), api.ok("The second answer."))
			code, out, errOut := runChatCmd(t, api.chatCmd(t, guard(t), "--history", history, "the first question"), "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "The first answer.\n", out)
			code, out, errOut = runChatCmd(t, api.chatCmd(t, guard(t), "--history", history, "the second question"), "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "The second answer.\n", out)
			reqs := api.srv.Requests()
			require.Len(t, reqs, 2)
			second := string(reqs[1].Raw)
			for _, want := range []string{"the first question", "The first answer.", "the second question"} {
				assert.Contains(t, second, want)
			}
			data, err := os.ReadFile(history)
			require.NoError(t, err)
			assert.NotContains(t, string(data), "test-key", "no secret in the history")
		})
	}
}

// TestChatBinaryFailures: a missing key is a usage error before any
// request; a turn that fails exits 1 with its error. Issue item 4.
func TestChatBinaryFailures(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			cmd := api.chatCmd(t, guard(t), "hi")
			cmd.Env = cleanEnv()
			code, out, errOut := runChatCmd(t, cmd, "")
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
			assert.Contains(t, errOut, "agentfsm chat: no API key: set "+api.keyVar)
			assert.Empty(t, api.srv.Requests())

			// Not retryable: the turn fails at once, exit 1 with its error.
			api.srv.Push(api.badKey())
			code, out, errOut = runChatCmd(t, api.chatCmd(t, guard(t), "hi"), "")
			assert.Equal(t, 1, code)
			assert.Empty(t, out)
			assert.Regexp(t, `^agentfsm chat: policy: .*401`, errOut)
			assert.Len(t, api.srv.Requests(), 1)
		})
	}
}

// TestChatBinarySignalAbortsTurn: SIGINT or SIGTERM in the middle of a
// streamed answer aborts the turn: the request is cancelled, the turn's
// last events go out and the command exits 1 with the aborted turn's
// error. Issue item 4.
func TestChatBinarySignalAbortsTurn(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			api := newFakeAnthropic(t)
			reply := api.ok("a long answer that never ends")
			reply.Break = &providertest.Break{After: 5, Stall: true}
			api.srv.Push(reply)
			cmd := api.chatCmd(t, guard(t), "--events", "hi")
			stderr, err := cmd.StderrPipe()
			require.NoError(t, err)
			var out strings.Builder
			cmd.Stdout = &out
			require.NoError(t, cmd.Start())
			r := bufio.NewReader(stderr)
			var rest strings.Builder
			for {
				line, err := r.ReadString('\n')
				require.NoError(t, err, "no message_update before the stall")
				if strings.Contains(line, `"type":"message_update"`) {
					break
				}
			}
			require.NoError(t, cmd.Process.Signal(sig))
			_, err = io.Copy(&rest, r)
			require.NoError(t, err)
			err = cmd.Wait()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			assert.Equal(t, 1, exit.ExitCode())
			assert.Empty(t, out.String())
			for _, want := range []string{`"stopReason":"aborted"`, `"type":"turn_settled","success":false`, "agentfsm chat: policy: "} {
				assert.Contains(t, rest.String(), want)
			}
			reqs := api.srv.Settled()
			require.Len(t, reqs, 1)
			assert.True(t, reqs[0].Cancelled, "the server saw the request cancelled")
		})
	}
}

// TestRPCBinaryRealProvider: "agentfsm rpc --provider" serves a session
// on the real adapter: a transient error, a retry and the answer, over the
// RPC protocol. Issue item 4.
func TestRPCBinaryRealProvider(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			t.Setenv(api.keyVar, "test-key") // the child's environment
			ctx := guard(t)
			api.srv.Push(api.transient(), api.ok("Served."))
			c, err := rpc.Start(binary(t), os.Stderr, "rpc", "--provider", api.name, "--base-url", api.baseURL,
				"--model", "test-model", "--context-window", "64000", "--settings", writeFile(t, "s.json", msSettings))
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, c.Close()) })

			st, err := c.GetState(ctx)
			require.NoError(t, err)
			assert.Equal(t, policy.Model{Provider: api.name, ID: "test-model", ContextWindow: 64000, BaseURL: api.baseURL}, st.Model)

			require.NoError(t, c.Prompt(ctx, "hi"))
			require.NoError(t, c.WaitForIdle(ctx))
			assert.Contains(t, eventTypes(eventsUntilSettled(t, ctx, c)), "auto_retry_start")
			msgs, err := c.GetMessages(ctx)
			require.NoError(t, err)
			require.NotEmpty(t, msgs)
			assert.Equal(t, "Served.", answer(msgs))
			reqs := api.srv.Requests()
			require.Len(t, reqs, 2)
			assert.Equal(t, "test-key", reqs[1].Key())
			assert.Contains(t, string(reqs[1].Raw), `"test-model"`)
		})
	}
}

// TestChatBinaryStdoutFull: an answer that cannot be written is a failure,
// exit 1 naming the write. Issue item 4.
func TestChatBinaryStdoutFull(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	defer full.Close()
	api := newFakeAnthropic(t)
	api.srv.Push(api.ok("lost"))
	cmd := api.chatCmd(t, guard(t), "hi")
	var errOut strings.Builder
	cmd.Stdout, cmd.Stderr = full, &errOut
	err = cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stderr: %s", errOut.String())
	assert.Equal(t, 1, exit.ExitCode())
	assert.Equal(t, "agentfsm chat: writing output: write /dev/stdout: no space left on device\n", errOut.String())
}

// TestInteractiveChatUnderTmux types a prompt into the interactive chat in
// a real terminal: the server is overloaded once, the retry counts down,
// the answer shows, and Ctrl-C quits. Issue item 4.
func TestInteractiveChatUnderTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (.ci/run installs it)")
	}
	ctx := guard(t)
	api := newFakeAnthropic(t)
	api.srv.Push(api.transient(), api.ok("Hello from the fake model."))
	settings := writeFile(t, "s.json", `{"retry":{"baseDelayMs":1500}}`)
	socket := filepath.Join(t.TempDir(), "tmux.sock")
	tmux := func(args ...string) string {
		out, err := exec.CommandContext(ctx, "tmux", append([]string{"-S", socket}, args...)...).CombinedOutput()
		require.NoError(t, err, "tmux %v: %s", args, out)
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", socket, "kill-server").Run() })
	tmux("new-session", "-d", "-s", "chat", "-x", "120", "-y", "30", "-e", "ANTHROPIC_API_KEY=test-key",
		binary(t)+" chat --provider anthropic --base-url "+api.baseURL+" --settings "+settings+"; echo exit=$?; sleep 60")
	waitFor := func(text string) {
		t.Helper()
		for range 300 {
			if strings.Contains(tmux("capture-pane", "-p", "-t", "chat"), text) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("never saw %q on:\n%s", text, tmux("capture-pane", "-p", "-t", "chat"))
	}
	waitFor("Enter sends")
	tmux("send-keys", "-t", "chat", "-l", "say hello")
	waitFor("> say hello")
	tmux("send-keys", "-t", "chat", "Enter")
	waitFor("Retrying (1/3) in")
	waitFor("assistant> Hello from the fake model.")
	tmux("send-keys", "-t", "chat", "C-c")
	waitFor("exit=0")
	assert.Contains(t, string(api.srv.Requests()[1].Raw), "say hello")
}
