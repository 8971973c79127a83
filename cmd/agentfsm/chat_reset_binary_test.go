package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/providertest"
)

// usageLimit429 is each provider's 429 for a usage limit (Anthropic's
// spend limit, OpenAI's insufficient_quota), with "retry-after: 3".
func usageLimit429(api fakeAPI) providertest.Reply {
	return usageLimit429After(api, "3")
}

// usageLimit429After is usageLimit429 with "retry-after: " + seconds.
func usageLimit429After(api fakeAPI, seconds string) providertest.Reply {
	r := providertest.OpenAIInsufficientQuota()
	if api.name == "anthropic" {
		r = providertest.AnthropicSpendLimit()
	}
	r.Header.Set("Retry-After", seconds)
	return r
}

// resetSettings cap one delay at a second: the 3-second reset is over it.
const resetSettings = `{"retry":{"maxDelayMs":1000,"waitForReset":true}}`

// shortResetSettings cap one delay at 100 ms, so that a reset half a
// second away is over it: TestChatBinaryWaitsForReset waits out four of
// them, which checks the same as four 3-second ones (a retry no earlier
// than the reset, a delay above the cap waited for) in a sixth of the time.
const shortResetSettings = `{"retry":{"maxDelayMs":100,"waitForReset":true}}`

// TestChatBinaryWaitsForReset: a 429 usage limit with retry-after: 0.5,
// over retry.maxDelayMs, is waited out with retry.waitForReset (the retry
// no earlier than half a second on, stderr saying so in words, the events
// carrying the reset), and a 3-second one fails the turn at once without
// it. Issue 24.
func TestChatBinaryWaitsForReset(t *testing.T) {
	// Its child process waits on the real clock: it waits beside the
	// other tests that do, once the package's sequential tests are done.
	t.Parallel()
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			api.srv.Push(usageLimit429After(api, "0.5"), api.ok("After the reset."))
			code, out, errOut := runChatCmd(t, api.chatCmdWith(t, guard(t), shortResetSettings, "hi"), "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "After the reset.\n", out)
			assert.Contains(t, errOut, "agentfsm chat: usage_limit: waiting until ")
			assert.Contains(t, errOut, "(500ms) for the limit to reset, then the turn goes on")
			assert.Contains(t, errOut, "agentfsm chat: the limit reset; the turn went on after waiting for it\n")
			reqs := api.srv.Requests()
			require.Len(t, reqs, 2)
			assert.GreaterOrEqual(t, reqs[1].Received.Sub(reqs[0].Received), 500*time.Millisecond, "no retry before the reset")

			// With --events, the events say it (stderr holds them only).
			api.srv.Push(usageLimit429After(api, "0.5"), api.ok("After the reset."))
			code, out, errOut = runChatCmd(t, api.chatCmdWith(t, guard(t), shortResetSettings, "--events", "hi"), "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "After the reset.\n", out)
			var start *events.AutoRetryStart
			var end *events.AutoRetryEnd
			for _, ev := range eventLines(t, errOut) {
				v, err := ev.Value()
				require.NoError(t, err)
				switch e := v.(type) {
				case events.AutoRetryStart:
					start = &e
				case events.AutoRetryEnd:
					end = &e
				}
			}
			require.NotNil(t, start)
			require.NotNil(t, end)
			assert.Equal(t, int64(500), start.DelayMs)
			assert.False(t, start.ResetAt.IsZero())
			assert.True(t, end.ResetWait)

			// Without waitForReset the same limit fails the turn at once.
			api.srv.Push(usageLimit429(api))
			began := time.Now()
			code, out, errOut = runChatCmd(t, api.chatCmdWith(t, guard(t), `{"retry":{"maxDelayMs":1000}}`, "hi"), "")
			assert.Equal(t, 1, code)
			assert.Empty(t, out)
			assert.Contains(t, errOut, "agentfsm chat: policy: retries exhausted after 0 attempts")
			assert.NotContains(t, errOut, "waiting until")
			assert.Less(t, time.Since(began), 3*time.Second, "it fails fast")
			assert.Len(t, api.srv.Requests(), 5)
		})
	}
}

// TestChatBinaryResumesResetWait: chat stopped (SIGTERM) while a turn waits
// for a reset keeps the wait beside its history; chat started again on that
// history resumes it, retries at the reset, and prints the answer. A wait
// that cannot be resumed (its history moved on) is said so, and the
// conversation goes on. Issue 24.
func TestChatBinaryResumesResetWait(t *testing.T) {
	// Its child process waits on the real clock: it waits beside the
	// other tests that do, once the package's sequential tests are done.
	t.Parallel()
	api := newFakeAnthropic(t)
	history := filepath.Join(t.TempDir(), "chat.jsonl")
	api.srv.Push(usageLimit429(api), api.ok("Resumed."))

	cmd := api.chatCmdWith(t, guard(t), resetSettings, "--history", history, "hi")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stderr)
	for lines.Scan() && !strings.Contains(lines.Text(), "waiting until") {
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	for lines.Scan() {
	}
	_ = cmd.Wait()
	_, err = os.Stat(waitFile(history))
	require.NoError(t, err, "the wait is kept for a restart")

	code, out, errOut := runChatCmd(t, api.chatCmdWith(t, guard(t), resetSettings, "--history", history), "")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "agentfsm chat: resuming the turn that waits for a usage limit's reset (the retry goes at ")
	assert.Equal(t, "Resumed.\n", out)
	reqs := api.srv.Requests()
	require.Len(t, reqs, 2)
	assert.GreaterOrEqual(t, reqs[1].Received.Sub(reqs[0].Received), 3*time.Second, "the resumed wait keeps its deadline")
	_, err = os.Stat(waitFile(history))
	assert.ErrorIs(t, err, os.ErrNotExist, "the settled turn leaves nothing to resume")
	file, err := os.ReadFile(history)
	require.NoError(t, err)
	assert.Contains(t, string(file), "Resumed.")

	// A wait whose history moved on cannot be resumed: chat says why and
	// goes on with the conversation.
	require.NoError(t, os.WriteFile(waitFile(history), []byte(`{"version":1}`), 0o600))
	api.srv.Push(api.ok("Fresh."))
	code, out, errOut = runChatCmd(t, api.chatCmdWith(t, guard(t), resetSettings, "--history", history, "again"), "")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "agentfsm chat: --history: the turn that waited for a usage limit's reset cannot be resumed: ")
	assert.Equal(t, "Fresh.\n", out)
	_, err = os.Stat(waitFile(history))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
