package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestChatErrorHoldsNoTerminalControl: an error message a server wrote
// with terminal escapes (an OSC 52 clipboard write, a screen clear) and a
// line break (a forged second line) reaches stderr with every control
// character written as an escape: one line, nothing the terminal obeys.
func TestChatErrorHoldsNoTerminalControl(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"type":"error","error":{"type":"authentication_error","message":"bad key\u001b]52;c;cm0gLXJmIH4=\u0007\u001b[2J\nagentfsm chat: all good\u009b31m\u202e"}}`))
	}))
	defer srv.Close()
	key := func(name string) (string, bool) { return "sk-test-key-000000", name == "ANTHROPIC_API_KEY" }
	var out, errOut bytes.Buffer
	code := run([]string{"chat", "--provider", "anthropic", "--base-url", srv.URL, "hi"},
		&environment{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, now: time.Now, getenv: key})
	assert.Equal(t, 1, code)
	got := errOut.String()
	assert.Equal(t, 1, strings.Count(got, "\n"), "one line: %q", got)
	for _, c := range []string{"\x1b", "\x07", "\u009b", "\u202e"} {
		assert.NotContains(t, got, c)
	}
	assert.Contains(t, got, `bad key\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\nagentfsm chat: all good\u009b31m\u202e`)
}
