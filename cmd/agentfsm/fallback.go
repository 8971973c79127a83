package main

import (
	"fmt"
	"io"

	"github.com/agentfsm/agentfsm/cmd/agentfsm/view"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/session"
)

// sayFallbacks subscribes to s: each model fallback and its revert is said
// on stderr in words (the interactive chat's view says them itself, and
// with --events stderr holds event lines only).
func sayFallbacks(s *session.Session, stderr io.Writer) (unsubscribe func()) {
	return s.Subscribe(func(ev events.Event) {
		switch e := ev.(type) {
		case events.ModelFallback:
			fmt.Fprintf(stderr, "agentfsm chat: %s\n", terminalSafe(view.FallbackWords(e), false))
		case events.ModelRevert:
			fmt.Fprintf(stderr, "agentfsm chat: %s\n", terminalSafe(view.RevertWords(e), false))
		}
	})
}
