package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// The terminal chat shows a prompt too large for the model's window in
// words: the compaction line and the turn's error both say that the last
// message alone is N tokens, over the model's window of W less its
// reserve, and no model call was made (issue 23: the too_large reason).
func TestChatViewNamesTheTooLargeReason(t *testing.T) {
	small := policy.Model{Provider: "scripted", ID: "small", ContextWindow: 20000}
	agent := scripted.New(scripted.Script{Model: small, Calls: []scripted.Call{{StopReason: "stop", Text: "never asked"}}})
	s, err := session.New(agent, session.WithModel(small))
	require.NoError(t, err)
	defer s.Close()
	var mu sync.Mutex
	var evs []events.Event
	unsubscribe := s.Subscribe(func(ev events.Event) { mu.Lock(); evs = append(evs, ev); mu.Unlock() })
	defer unsubscribe()
	err = s.Prompt(context.Background(), strings.Repeat("p", 80000))
	require.ErrorIs(t, err, policy.ErrOverflow)
	s.Flush()

	m := &chatModel{s: s}
	mu.Lock()
	for _, ev := range evs {
		m.Update(eventMsg{ev})
	}
	mu.Unlock()
	m.Update(turnDone{err})
	screen := m.View().Content
	const why = "the last message alone is 20000 tokens, over the model's window of 20000 less its reserve of 16384"
	assert.Contains(t, screen, "  Auto-compaction failed: Context overflow recovery failed: "+why, screen)
	assert.Contains(t, screen, "error: policy: context overflow not recovered: "+why, screen)
	assert.NotContains(t, screen, "nothing to compact")
	assert.Equal(t, 1, agent.Remaining(), "no model call")
}
