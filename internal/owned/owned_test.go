package owned_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/agentfsm/agentfsm/internal/owned"
	"github.com/agentfsm/agentfsm/transcript"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func message() transcript.Message {
	return transcript.Message{ID: "a1", Role: transcript.RoleAssistant,
		Content: []transcript.Block{transcript.TextBlock("text"),
			{Type: transcript.BlockToolCall, ID: "c1", Name: "read", Arguments: json.RawMessage(`{"p":1}`)}},
		Usage:   &transcript.Usage{Input: 1, Cost: &transcript.Cost{Total: 0.5}},
		Headers: map[string]string{"request-id": "r1"}}
}

// TestMessageSharesNothing: changing every part of the copy leaves the
// original as it was, and the copy equals the original until then.
func TestMessageSharesNothing(t *testing.T) {
	orig := message()
	c := owned.Message(orig)
	assert.Equal(t, orig, c)
	c.Content[0].Text = "changed"
	c.Content[1].Arguments[1] = 'X'
	c.Content = append(c.Content, transcript.TextBlock("added"))
	c.Usage.Input = 9
	c.Usage.Cost.Total = 9
	c.Headers["request-id"] = "changed"
	c.Headers["added"] = "x"
	assert.Equal(t, message(), orig)
}

// TestMessageKeepsNil: what is absent stays absent (nil, not empty), so
// the copy encodes as the original does.
func TestMessageKeepsNil(t *testing.T) {
	m := transcript.Message{Role: transcript.RoleUser, Content: []transcript.Block{}}
	c := owned.Message(m)
	assert.NotNil(t, c.Content)
	assert.Nil(t, c.Usage)
	assert.Nil(t, c.Headers)
	c = owned.Message(transcript.Message{Content: []transcript.Block{{Type: transcript.BlockText}}})
	assert.Nil(t, c.Content[0].Arguments)
}
