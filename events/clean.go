package events

import (
	"github.com/agentfsm/agentfsm/internal/wiretext"
	"github.com/agentfsm/agentfsm/transcript"
)

// Clean returns ev with every message and string in it valid UTF-8, under
// the rule of transcript.Message.Clean (each byte that is not valid UTF-8
// becomes U+FFFD): ev itself when all of it already is, so that an event
// passed on unchanged is not copied. The engine cleans each event an agent
// reports with it, so that the events, the history and the RPC lines hold
// the same text.
func Clean(ev Event) Event {
	switch e := ev.(type) {
	case MessageStart:
		if m, changed := e.Message.Clean(); changed {
			e.Message = m
			return e
		}
	case MessageUpdate:
		m, changed := e.Message.Clean()
		if kind, text := wiretext.String(e.Delta.Kind), wiretext.String(e.Delta.Text); changed || kind != e.Delta.Kind || text != e.Delta.Text {
			e.Message, e.Delta.Kind, e.Delta.Text = m, kind, text
			return e
		}
	case MessageEnd:
		if m, changed := e.Message.Clean(); changed {
			e.Message = m
			return e
		}
	case AgentEnd:
		if ms := transcript.CleanMessages(e.Messages); len(ms) > 0 && &ms[0] != &e.Messages[0] {
			e.Messages = ms
			return e
		}
	}
	return ev
}
