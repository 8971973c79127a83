package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests run "agentfsm chat" against each provider's fake, as
// chat_binary_test.go does, for what chat says on stderr without
// --events: a line in words per retry, wait, compaction and credential
// switch (issue 26 item 1).

// overloadedText is each fake's overloaded error as the session's
// AutoRetryStart.ErrorMessage holds it.
var overloadedText = map[string]string{
	"anthropic": "529 overloaded_error: Overloaded",
	"openai":    "503 server_error: That model is currently overloaded with other requests.",
}

// TestChatBinarySaysRetries: two overloaded replies, then an answer: one
// line per retry on stderr, naming the delay, the attempt and the error;
// the answer alone on stdout. --quiet writes none of them.
func TestChatBinarySaysRetries(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			api.srv.Push(api.transient(), api.transient(), api.ok("Done."))
			code, out, errOut := runChatCmd(t, api.chatCmd(t, guard(t), "hi"), "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "Done.\n", out)
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			require.Len(t, lines, 2, errOut)
			for i, line := range lines {
				assert.Regexp(t, fmt.Sprintf(`^agentfsm chat: retrying in \d+ms \(attempt %d of 3\): %s`, i+1,
					regexp.QuoteMeta(overloadedText[api.name])), line)
			}
			assert.NotContains(t, errOut, "\r", "no countdown in a pipe")

			api.srv.Push(api.transient(), api.ok("Done."))
			code, out, errOut = runChatCmd(t, api.chatCmd(t, guard(t), "--quiet", "hi"), "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "Done.\n", out)
			assert.Empty(t, errOut, "--quiet")
		})
	}
}

// TestChatBinarySaysCompactionAndSwitch: an overflow's compaction is said
// (why it runs, then the tokens before and after), and so is a usage
// limit that switches credentials.
func TestChatBinarySaysCompactionAndSwitch(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			api.srv.Push(api.ok("Seven open questions, by section."), api.overflow(), api.ok("Here are the drafts."))
			stdin := "read the design notes and list the open questions\nnow draft answers to every question\n"
			code, out, errOut := runChatCmd(t, api.chatCmd(t, guard(t), "--summarizer", "digest"), stdin)
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "Seven open questions, by section.\nHere are the drafts.\n", out)
			assert.Regexp(t, `^agentfsm chat: compacting the conversation: the context overflowed\n`+
				`agentfsm chat: compacted the conversation: \d+ tokens → \d+; the turn goes on\n$`, errOut)

			settings := `{"retry":{"baseDelayMs":1,"rules":"extended"},
				"credentials":[{"id":"first","env":"TEAM_KEY_A"},{"id":"second","env":"TEAM_KEY_B"}]}`
			api.srv.Push(api.usageLimit(), api.ok("Paid for."))
			cmd := api.chatCmdWith(t, guard(t), settings, "hi")
			cmd.Env = append(cleanEnv(), "TEAM_KEY_A=sk-a", "TEAM_KEY_B=sk-b")
			code, out, errOut = runChatCmd(t, cmd, "")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "Paid for.\n", out)
			reqs := api.srv.Requests()
			require.Len(t, reqs, 5)
			first := map[string]string{"sk-a": "first", "sk-b": "second"}[reqs[3].Key()]
			assert.Regexp(t, `^agentfsm chat: usage limit on credential "`+first+
				`": switching to the next credential, retrying now \(attempt 1 of 3\): \S.*\n$`, errOut, "the credential that met the limit")
		})
	}
}

// TestChatBinaryTimeoutNamesTheRetriedError: a turn that --timeout ends
// while it waits to retry says what it was retrying, not only that the
// deadline passed.
func TestChatBinaryTimeoutNamesTheRetriedError(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			api.srv.Push(api.transient())
			code, out, errOut := runChatCmd(t, api.chatCmdWith(t, guard(t), `{"retry":{"baseDelayMs":60000}}`, "--timeout", "300ms", "hi"), "")
			assert.Equal(t, 1, code)
			assert.Empty(t, out)
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			require.Len(t, lines, 2, errOut)
			assert.True(t, strings.HasPrefix(lines[0], "agentfsm chat: retrying in 1m0s (attempt 1 of 3): "), lines[0])
			assert.True(t, strings.HasPrefix(lines[1], "agentfsm chat: the turn ran past --timeout 300ms while retrying (attempt 1 of 3) after: "+
				overloadedText[api.name]), lines[1])
			assert.True(t, strings.HasSuffix(lines[1], "; policy: aborted: context deadline exceeded"), lines[1])
		})
	}
}

// TestChatBinaryGoesOnAfterFailedTurn: in a conversation from stdin, a
// turn that fails prints its error and the conversation goes on with the
// next prompt; the exit status is 1 because one failed.
func TestChatBinaryGoesOnAfterFailedTurn(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			api.srv.Push(api.ok("One."), api.badKey(), api.ok("Three."))
			code, out, errOut := runChatCmd(t, api.chatCmd(t, guard(t)), "first\r\nsecond\nthird\n")
			assert.Equal(t, 1, code)
			assert.Equal(t, "One.\nThree.\n", out)
			assert.Regexp(t, "^agentfsm chat: policy: .*401[^\n]*\n$", errOut)
			reqs := api.srv.Requests()
			require.Len(t, reqs, 3)
			assert.NotContains(t, string(reqs[0].Raw), `\r`, "a CRLF line is the prompt without its CR")
			assert.Contains(t, string(reqs[2].Raw), "third")

			// All turns answered: exit 0.
			api.srv.Push(api.ok("A."), api.ok("B."))
			code, out, errOut = runChatCmd(t, api.chatCmd(t, guard(t)), "a\nb\n")
			assert.Equal(t, 0, code, errOut)
			assert.Equal(t, "A.\nB.\n", out)
		})
	}
}
