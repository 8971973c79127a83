package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestChatFlagsAndFiles: every bad flag, file or missing key is one line
// naming it, exit 2, before any request. Issue item 4.
func TestChatFlagsAndFiles(t *testing.T) {
	key := func(name string) (string, bool) { return "k", name == "ANTHROPIC_API_KEY" || name == "OPENAI_API_KEY" }
	none := func(string) (string, bool) { return "", false }
	cases := []struct {
		args   []string
		getenv func(string) (string, bool)
		says   string
	}{
		{[]string{"chat", "hi"}, key, "--provider is required: anthropic or openai"},
		{[]string{"chat", "--provider", "openai", " ", "\t"}, key, "the prompt is blank"},
		{[]string{"chat", "--provider", "gemini", "hi"}, key, `unknown --provider "gemini"`},
		{[]string{"chat", "--provider", "anthropic", "hi"}, none, "no API key: set ANTHROPIC_API_KEY"},
		{[]string{"chat", "--provider", "openai", "hi"}, none, "no API key: set OPENAI_API_KEY"},
		{[]string{"chat", "--provider", "openai", "--context-window", "-5", "hi"}, key, "--context-window must not be negative, got -5"},
		{[]string{"chat", "--provider", "openai", "--context-window", "many", "hi"}, key, `invalid value "many" for flag -context-window`},
		{[]string{"chat", "--provider", "anthropic", "--settings", "/nonexistent/s.json", "hi"}, key, "--settings: open /nonexistent/s.json"},
		{[]string{"chat", "--provider", "anthropic", "--settings", writeFile(t, "bad.json", `{"retry":{"maxRetry":1}}`), "hi"}, key, `unknown key "retry.maxRetry"`},
		{[]string{"chat", "--provider", "anthropic", "--history", t.TempDir(), "hi"}, key, "--history: "},
		{[]string{"chat", "--provider", "anthropic", "--history", writeFile(t, "h.jsonl", "garbage\n{}\n"), "hi"}, key, "--history: "},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		code := run(c.args, &environment{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, now: time.Now, getenv: c.getenv})
		assert.Equal(t, 2, code, c.args)
		assert.Empty(t, out.String(), c.args)
		assert.Contains(t, errOut.String(), c.says, c.args)
		assert.True(t, strings.HasPrefix(errOut.String(), "agentfsm chat"), c.args)
		assert.Equal(t, 1, strings.Count(errOut.String(), "\n"), "one line: %q", errOut.String())
	}
}

// TestRPCProviderFlags: the real backend's flags of rpc are checked as
// chat's; without --provider the scripted agent serves. Issue item 4.
func TestRPCProviderFlags(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"rpc", "--provider", "anthropic", "--script", writeFile(t, "s.json", `{"calls":[]}`)}, "--script and --provider exclude each other"},
		{[]string{"rpc", "--model", "gpt-4o"}, "--model, --base-url and --context-window need --provider"},
		{[]string{"rpc", "--provider", "openai"}, "no API key: set OPENAI_API_KEY"},
		{[]string{"rpc", "--provider", "llama"}, `unknown --provider "llama"`},
		{[]string{"rpc", "--summarizer", "model"}, "--summarizer model needs --provider: the scripted agent has no model to summarize with"},
		{[]string{"rpc", "--script", writeFile(t, "s.json", `{"calls":[]}`), "--summarizer", "model"}, "--summarizer model needs --provider"},
		{[]string{"rpc", "--summarizer", "oracle"}, `--summarizer "oracle": want digest or model`},
		{[]string{"rpc", "--summarizer", ""}, `--summarizer "": want digest or model`},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		code := run(c.args, &environment{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, now: time.Now, getenv: none})
		assert.Equal(t, 2, code, c.args)
		assert.Equal(t, "agentfsm rpc: ", errOut.String()[:min(len(errOut.String()), 14)], c.args)
		assert.Contains(t, errOut.String(), c.says, c.args)
		assert.Equal(t, 1, strings.Count(errOut.String(), "\n"), "one line: %q", errOut.String())
	}
}

// TestSummarizerHelp: chat's and rpc's help name the --summarizer flag and
// its default, the model with a provider and the digest without. Issue 23
// item 4.
func TestSummarizerHelp(t *testing.T) {
	for _, sub := range []string{"chat", "rpc"} {
		code, out, _ := runCmd("", sub, "-h")
		assert.Equal(t, 0, code)
		assert.Contains(t, out, "[--summarizer digest|model]", sub)
		assert.Contains(t, out, "--summarizer digest|model", sub)
	}
	_, out, _ := runCmd("", "chat", "-h")
	assert.Contains(t, out, "(default model)")
	_, out, _ = runCmd("", "rpc", "-h")
	assert.Contains(t, out, "default: model with --provider, digest without")
}
