package main

import (
	"bytes"
	"io"
	"strings"
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

// TestChatCountsDownOnATerminal: with stderr on a terminal, chat draws
// the retry's line in place (to count it down) and leaves it whole when
// the retry goes; stdout, a file, holds the answer alone. Issue 26 item 1.
func TestChatCountsDownOnATerminal(t *testing.T) {
	ptmx, pts := openPTYPair(t)
	read := make(chan string)
	go func() {
		var b bytes.Buffer
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			b.Write(buf[:n])
			if err != nil || strings.Contains(b.String(), "Overloaded\r\n") {
				read <- b.String()
				return
			}
		}
	}()
	api := newFakeAnthropic(t)
	api.srv.Push(api.transient(), api.ok("Counted."))
	key := func(name string) (string, bool) { return "test-key", name == "ANTHROPIC_API_KEY" }
	var out bytes.Buffer
	env := &environment{stdin: strings.NewReader(""), stdout: &out, stderr: pts, now: time.Now, getenv: key}
	code := run([]string{"chat", "--provider", "anthropic", "--base-url", api.baseURL,
		"--settings", writeFile(t, "s.json", `{"retry":{"baseDelayMs":50}}`), "hi"}, env)
	assert.Equal(t, 0, code)
	assert.Equal(t, "Counted.\n", out.String())
	select {
	case text := <-read:
		const line = "agentfsm chat: retrying in 50ms (attempt 1 of 3): 529 overloaded_error: Overloaded"
		// A new pseudo-terminal has no size: the live line is cut to 80
		// columns; the line left is whole.
		assert.Equal(t, "\r\x1b[K"+line[:78]+"…\r\x1b[K"+line+"\r\n", text)
	case <-guard(t).Done():
		t.Fatal("nothing on the terminal")
	}
}
