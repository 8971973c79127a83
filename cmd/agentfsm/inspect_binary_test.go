package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateInspect = flag.Bool("update", false, "rewrite inspect's golden files (and the recovery history they are told from)")

// storySettings: retries a millisecond apart, at most two of them, the
// extended rules (a usage limit switches credentials), two credentials,
// and a compaction that keeps only the latest few tokens.
const storySettings = `{"retry":{"baseDelayMs":1,"maxRetries":2,"rules":"extended"},"compaction":{"keepRecentTokens":5},
	"credentials":[{"id":"first","type":"api_key","env":"TEAM_KEY_A"},{"id":"second","env":"TEAM_KEY_B"}]}`

// writeStoryHistory has "agentfsm chat --history path" live through a
// session with every kind of recovery, against api: a turn recovered after
// two overloads, a turn whose context overflows and is compacted, a usage
// limit that switches credentials, and (in a second invocation) a turn
// whose retries run out. testdata/history-before-recovery.jsonl was
// written by it before history had recovery entries.
func writeStoryHistory(t *testing.T, api fakeAPI, path string) {
	t.Helper()
	env := append(cleanEnv(), "TEAM_KEY_A=sk-a-3f0c", "TEAM_KEY_B=sk-b-91d2")
	api.srv.Push(api.transient(), api.transient(), api.ok("Hello after two overloads."),
		api.ok("Seven open questions."), api.overflow(), api.ok("Here are the drafts."),
		api.usageLimit(), api.ok("Paid for."))
	cmd := api.chatCmdWith(t, guard(t), storySettings, "--summarizer", "digest", "--history", path)
	cmd.Env = env
	code, _, errOut := runChatCmd(t, cmd, "hello\nlist the open questions\nnow draft answers to every question\nand one more\n")
	require.Equal(t, 0, code, errOut)
	api.srv.Push(api.transient(), api.transient(), api.transient())
	cmd = api.chatCmdWith(t, guard(t), storySettings, "--history", path, "are you there?")
	cmd.Env = env
	code, _, errOut = runChatCmd(t, cmd, "")
	require.Equal(t, 1, code, errOut)
}

// TestInspectBinaryRealSession: "agentfsm inspect" on the history a chat
// session wrote, through retries, an overflow's compaction, a credential
// switch and an exhausted chain, tells each with what the session decided
// on: the class, the delay, the credential, the tokens, the limit.
func TestInspectBinaryRealSession(t *testing.T) {
	for _, api := range fakeAPIs(t) {
		t.Run(api.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "chat.jsonl")
			writeStoryHistory(t, api, path)
			code, out, errOut := runChatCmd(t, inspectCmd(t, path), "")
			require.Equal(t, 0, code, errOut)
			assert.Empty(t, errOut)
			for _, want := range []string{
				"32 entries, 5 turns",
				"call failed", "in 1ms, attempt 1 of 2; retryable: ",
				"recovered", "after 2 retries",
				"compaction", "overflow: ", "kept from user-",
				"credential switch", "usage_limit: ",
				"exhausted", "after 2 retries, limit: retry.maxRetries",
				"turn failed", "retries exhausted after 2 attempts",
				`"are you there?"  (failed)`,
			} {
				assert.Contains(t, out, want)
			}
			assert.Regexp(t, `credential switch +line 19 +from (first|second) \(usage limit\)`, out)
			assert.Regexp(t, `retry +line 3 +in 1ms`, out)
			assert.NotContains(t, out, "without recovery entries")
			if api.name == "anthropic" && *updateInspect {
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile("testdata/history-recovery.jsonl", data, 0o644))
			}
		})
	}
}

func inspectCmd(t *testing.T, args ...string) *exec.Cmd {
	return exec.CommandContext(guard(t), binary(t), append([]string{"inspect"}, args...)...)
}
