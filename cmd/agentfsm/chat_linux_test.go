package main

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestChatOnTerminalInNeedsTerminalOut: with no prompt, stdin a terminal and
// stdout not, chat says what it needs (one line, exit 2) instead of waiting
// for lines or starting the interactive chat.
// Issue item 4.
func TestChatOnTerminalInNeedsTerminalOut(t *testing.T) {
	pts := openPTY(t)
	var out, errOut bytes.Buffer
	key := func(string) (string, bool) { return "k", true }
	code := run([]string{"chat", "--provider", "anthropic"}, &environment{stdin: pts, stdout: &out, stderr: &errOut, now: time.Now, getenv: key})
	assert.Equal(t, 2, code)
	assert.Empty(t, out.String())
	assert.Equal(t, "agentfsm chat: give a prompt after the flags, or prompts on stdin, one a line (the interactive chat needs stdout on the terminal too)\n", errOut.String())
}

// TestInteractiveChatRefusesLogsOnItsTerminal: the event log would write
// over the interactive chat's screen; chat asks for stderr elsewhere.
func TestInteractiveChatRefusesLogsOnItsTerminal(t *testing.T) {
	pts := openPTY(t)
	key := func(string) (string, bool) { return "k", true }
	var errOut bytes.Buffer
	stderr := io.MultiWriter(&errOut)
	env := &environment{stdin: pts, stdout: pts, stderr: pts, now: time.Now, getenv: key}
	tel := &telemetry{level: new(string)}
	*tel.level = "info"
	assert.NoError(t, tel.start(env, "agentfsm"))
	assert.True(t, tel.logsTo(pts), "a log on the terminal")
	assert.False(t, tel.logsTo(stderr), "a log elsewhere")
	code := run([]string{"chat", "--provider", "anthropic", "--log-level", "info"}, env)
	assert.Equal(t, 2, code)
}
