package main

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChatOnTerminalInNeedsTerminalOut: with no prompt, stdin a terminal and
// stdout not, chat says what it needs (one line, exit 2) instead of waiting
// for lines or starting the interactive chat.
// Issue item 4.
func TestChatOnTerminalInNeedsTerminalOut(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer ptmx.Close()
	var unlock, n uint32
	require.NoError(t, ioctl(ptmx, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)))
	require.NoError(t, ioctl(ptmx, syscall.TIOCGPTN, unsafe.Pointer(&n)))
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	defer pts.Close()
	var out, errOut bytes.Buffer
	key := func(string) (string, bool) { return "k", true }
	code := run([]string{"chat", "--provider", "anthropic"}, &environment{stdin: pts, stdout: &out, stderr: &errOut, now: time.Now, getenv: key})
	assert.Equal(t, 2, code)
	assert.Empty(t, out.String())
	assert.Equal(t, "agentfsm chat: give a prompt after the flags, or prompts on stdin, one a line (the interactive chat needs stdout on the terminal too)\n", errOut.String())
}
