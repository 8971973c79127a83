package events_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/transcript"
)

// TestCleanMakesEveryStringValid: an agent's event with text that is not
// valid UTF-8 comes back with U+FFFD in its place, in the message and in a
// delta; an event already valid comes back as it is.
func TestCleanMakesEveryStringValid(t *testing.T) {
	bad := transcript.Message{ID: "a\xff", Role: transcript.RoleAssistant, Content: []transcript.Block{transcript.TextBlock("hi \xfe")}}
	got := events.Clean(events.MessageUpdate{Message: bad, Delta: events.Delta{Kind: "text", Text: "\xc3"}}).(events.MessageUpdate)
	assert.Equal(t, "a\uFFFD", got.Message.ID)
	assert.Equal(t, "hi \uFFFD", got.Message.Content[0].Text)
	assert.Equal(t, "\uFFFD", got.Delta.Text)

	end := events.Clean(events.AgentEnd{Messages: []transcript.Message{bad}}).(events.AgentEnd)
	assert.Equal(t, "a\uFFFD", end.Messages[0].ID)

	good := events.MessageEnd{Message: transcript.Message{ID: "m", Role: transcript.RoleAssistant, Content: []transcript.Block{transcript.TextBlock("fine")}}}
	assert.Equal(t, events.Event(good), events.Clean(good))
	assert.Equal(t, events.Event(events.CallStart{}), events.Clean(events.CallStart{}))
}
