package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// stubAgent answers every run with one successful model call.
type stubAgent struct{ calls atomic.Int64 }

func (a *stubAgent) Run(_ context.Context, req session.RunRequest, emit func(events.Event)) error {
	msg := transcript.Message{ID: "stub-" + strconv.FormatInt(a.calls.Add(1), 10), Role: transcript.RoleAssistant,
		Provider: req.Model.Provider, Model: req.Model.ID, StopReason: "stop", Content: transcript.TextContent("ok"),
		Usage: &transcript.Usage{Input: 10, Output: 2, TotalTokens: 12}}
	emit(events.AgentStart{})
	emit(events.CallStart{})
	emit(events.MessageStart{Message: msg})
	emit(events.MessageEnd{Message: msg})
	emit(events.CallEnd{})
	emit(events.AgentEnd{Messages: []transcript.Message{msg}})
	return nil
}

// TestPromptAckFollowsPreviousTurn: a prompt accepted while the events of
// the turn before are still on their way to the output is acknowledged
// after that turn's turn_settled and before its own turn's events, so a
// client matches each turn_settled to its prompt. Issue item 25.
func TestPromptAckFollowsPreviousTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := session.New(&stubAgent{}, session.WithModel(policy.Model{Provider: "stub", ID: "stub-1", ContextWindow: 200000}), session.WithConfig(policy.ReferenceConfig()))
		require.NoError(t, err)
		defer s.Close()
		var out bytes.Buffer
		srv := &server{s: s, w: newWriter(&out)}
		// The events reach the writer only when the test delivers them.
		var mu sync.Mutex
		var queued []events.Event
		unsubscribe := s.Subscribe(func(ev events.Event) {
			mu.Lock()
			queued = append(queued, ev)
			mu.Unlock()
		})
		defer unsubscribe()
		deliver := func() {
			synctest.Wait()
			s.Flush()
			mu.Lock()
			evs := queued
			queued = nil
			mu.Unlock()
			for _, ev := range evs {
				srv.w.event(ev)
			}
		}
		ctx := context.Background()
		srv.handle(ctx, []byte(`{"id":"one","type":"prompt","message":"one"}`), false)
		synctest.Wait() // turn one settles; its events are not written yet
		srv.handle(ctx, []byte(`{"id":"two","type":"prompt","message":"two"}`), false)
		deliver()
		deliver()
		srv.wg.Wait()

		var seq []string
		for _, line := range bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")) {
			var obj struct{ ID, Type string }
			require.NoError(t, json.Unmarshal(line, &obj), "%q", line)
			if obj.Type == "response" {
				seq = append(seq, "ack "+obj.ID)
			} else {
				seq = append(seq, obj.Type)
			}
		}
		require.Len(t, seq, 2*(len(seq)/2), "the two turns are alike: %v", seq)
		half := len(seq) / 2
		assert.Equal(t, "ack one", seq[0], seq)
		assert.Equal(t, "turn_settled", seq[half-1], seq)
		assert.Equal(t, "ack two", seq[half], seq)
		assert.Equal(t, seq[1:half], seq[half+1:], "each turn's events after its ack")
	})
}
