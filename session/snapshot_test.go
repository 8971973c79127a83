package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
)

// A session snapshotted while it waits out a backoff, then stopped, goes
// on in a new Session made from the snapshot and the same history: the
// retry fires at the original deadline with the same attempt.
func TestSessionResumesFromSnapshot(t *testing.T) {
	bubble(t, func(t *testing.T) {
		history := &history.MemoryHistory{}
		s, _, _ := newSession(t, []scripted.Call{fail(service503)}, session.WithHistory(history))
		start := time.Now()
		done := promptAsync(s, "hi")
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, states.Backoff, s.Status().State)
		snap, err := s.Snapshot()
		require.NoError(t, err)
		data, err := json.Marshal(snap)
		require.NoError(t, err)
		assert.NotContains(t, string(data), "503", "a snapshot copies no message")
		before := s.Messages()
		require.NoError(t, s.Close()) // the process ends
		require.ErrorIs(t, <-done, policy.ErrAborted)

		var back policy.Snapshot
		require.NoError(t, json.Unmarshal(data, &back))
		agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{ok("done")}})
		r, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithHistory(history), session.WithSnapshot(back))
		require.NoError(t, err)
		defer r.Close()
		rec := record(r)
		assert.Equal(t, "test-session", r.ID())
		assert.Equal(t, before, r.Messages())
		assert.Equal(t, policy.Status{State: states.Backoff, Attempt: 1, Retrying: true, RetryEnabled: true,
			CompactionEnabled: true, MessageCount: len(before)}, r.Status())
		time.Sleep(2*time.Second - time.Since(start))
		synctest.Wait()
		assert.Equal(t, []string{"retry_end ok 1"}, rec.recovery(), "the retry ran at the original deadline")
		assert.Equal(t, 2*time.Second, rec.timeOf("agent_start")+500*time.Millisecond)
		assert.Equal(t, states.Idle, r.Status().State)
		require.NoError(t, r.Prompt(context.Background(), "and then"))
	})
}

// A snapshot that cannot be resumed is refused by New with a clear error.
func TestSessionRefusesUnknownSnapshot(t *testing.T) {
	_, err := session.New(scripted.New(scripted.Script{}), session.WithSnapshot(policy.Snapshot{Version: 99, SessionID: "x"}))
	require.ErrorIs(t, err, policy.ErrSnapshot)
	assert.ErrorContains(t, err, "version 99")
}

// A session resumed after its backoff's deadline runs the retry at once,
// on its loop, while New returns: New must not read the engine then (it
// did, racing the loop's first run).
func TestResumeAfterTheDeadlineRacesNothing(t *testing.T) {
	bubble(t, func(t *testing.T) {
		history := &history.MemoryHistory{}
		s, _, _ := newSession(t, []scripted.Call{fail(service503)}, session.WithHistory(history))
		done := promptAsync(s, "hi")
		synctest.Wait()
		snap, err := s.Snapshot()
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.ErrorIs(t, <-done, policy.ErrAborted)
		time.Sleep(3 * time.Second) // the process restarts after the deadline

		agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{ok("done")}})
		r, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithHistory(history), session.WithSnapshot(snap))
		require.NoError(t, err)
		defer r.Close()
		synctest.Wait()
		assert.Equal(t, states.Idle, r.Status().State)
		assert.Equal(t, 0, r.Status().Attempt)
	})
}

// A session snapshotted while a prompt waits for the check before it (a
// threshold compaction, here never answered), then stopped, sends that
// prompt once resumed: history records it, the agent gets it, the turn
// settles on its run. The prompt was lost, and the turn went on without it.
// The snapshot's copy of the prompt is the caller's to change.
func TestSnapshotKeepsThePromptTheCheckHeld(t *testing.T) {
	bubble(t, func(t *testing.T) {
		history := &history.MemoryHistory{}
		s, agent, _ := newSession(t, []scripted.Call{ok("first")}, smallKeep(), session.WithHistory(history),
			session.WithSummarizer(blockingSummarizer))
		warmUp(t, s)
		agent.Append(scripted.Call{StopReason: "stop", Usage: usage(180000), LatencyMs: 1000})
		done := promptAsync(s, "second question, long enough too")
		time.Sleep(500 * time.Millisecond)
		s.Abort() // the big answer ends aborted: the check before the next prompt compacts
		require.ErrorIs(t, <-done, policy.ErrAborted)
		done = promptAsync(s, "third question, waiting for its check")
		synctest.Wait()
		require.Equal(t, states.Compacting, s.Status().State)
		snap, err := s.Snapshot()
		require.NoError(t, err)
		data, err := json.Marshal(snap)
		require.NoError(t, err)
		// The snapshot's prompt is the caller's: changing it leaves the
		// held prompt as it was (it shared the engine's content blocks).
		require.NotNil(t, snap.Prompt)
		snap.Prompt.Content[0].Text = "changed in the snapshot"
		again, err := s.Snapshot()
		require.NoError(t, err)
		assert.Equal(t, "third question, waiting for its check", again.Prompt.Text())
		require.NoError(t, s.Close())
		require.Error(t, <-done)

		var back policy.Snapshot
		require.NoError(t, json.Unmarshal(data, &back))
		next := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{ok("answered")}})
		r, err := session.New(next, session.WithModel(scripted.DefaultModel), session.WithHistory(history), session.WithSnapshot(back))
		require.NoError(t, err)
		defer r.Close()
		synctest.Wait()
		assert.Equal(t, 0, next.Remaining(), "the prompt's run called the model")
		msgs := r.Messages()
		require.GreaterOrEqual(t, len(msgs), 2)
		assert.Equal(t, "third question, waiting for its check", msgs[len(msgs)-2].Text())
		assert.Equal(t, "answered", msgs[len(msgs)-1].Text())
		entries := readAll(t, history)
		var prompts []string
		for _, e := range entries {
			if e.Type == transcript.EntryMessage && e.Message.Role == transcript.RoleUser {
				prompts = append(prompts, e.Message.Text())
			}
		}
		assert.Contains(t, prompts, "third question, waiting for its check")
		assert.Equal(t, states.Idle, r.Status().State)
	})
}

// TestSnapshotAndConfigAreTheCallers: the snapshot and the settings a
// session hands out are values. Changing the fallback settings of either
// (a pointer in Config) changes nothing in the session. The snapshot
// handed out the engine's own FallbackConfig, which a caller could edit
// while the session's loop read it.
func TestSnapshotAndConfigAreTheCallers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		cfg := policy.DefaultConfig()
		cfg.Fallback = &policy.FallbackConfig{Models: []policy.FallbackModel{{ID: "small"}}}
		s, _, _ := newSession(t, nil, session.WithConfig(cfg))
		want := s.Config()
		snap, err := s.Snapshot()
		require.NoError(t, err)
		snap.Config.Fallback.Models[0].ID = "changed in the snapshot"
		snap.Config.Fallback.CooldownMs = 1
		got := s.Config()
		got.Fallback.Models[0].ID = "changed in the config"
		assert.Equal(t, want, s.Config())
		again, err := s.Snapshot()
		require.NoError(t, err)
		assert.Equal(t, want, again.Config)
	})
}

// TestMessagesAreTheCallers: Messages returns a copy, which the caller
// may change: its content blocks, tool arguments, usage (and cost) and
// headers belong to it, and the session's context stays as it was. The
// copy shared the session's blocks, so a caller that edited a message for
// display rewrote what the next model call would see, from another
// goroutine than the session's loop.
func TestMessagesAreTheCallers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		call := transcript.Block{Type: transcript.BlockToolCall, ID: "c1", Name: "read", Arguments: json.RawMessage(`{"path":"a.go"}`)}
		usage := &transcript.Usage{Input: 100, Output: 20, TotalTokens: 120, Cost: &transcript.Cost{Total: 0.5}}
		failed := fail(service503)
		failed.Status, failed.Headers = 503, map[string]string{"request-id": "req-1"}
		cfg := policy.ReferenceConfig()
		cfg.Retry.Enabled = false // the failed message stays in the context
		s, _, _ := newSession(t, []scripted.Call{failed,
			{StopReason: "toolUse", Content: []transcript.Block{call}, Usage: usage}, ok("the answer")},
			session.WithConfig(cfg))
		require.Error(t, s.Prompt(context.Background(), "the first question"))
		require.NoError(t, s.Prompt(context.Background(), "the question"))
		// What a caller could change, spelled out.
		held := func(msgs []transcript.Message) string {
			var b strings.Builder
			for _, m := range msgs {
				for _, c := range m.Content {
					fmt.Fprintf(&b, "%q %s|", c.Text, c.Arguments)
				}
				if m.Usage != nil {
					fmt.Fprintf(&b, "usage %d|", m.Usage.Input)
					if m.Usage.Cost != nil {
						fmt.Fprintf(&b, "cost %v|", m.Usage.Cost.Total)
					}
				}
				for k, v := range m.Headers {
					fmt.Fprintf(&b, "%s=%s|", k, v)
				}
				b.WriteString("\n")
			}
			return b.String()
		}
		got := s.Messages()
		want := held(got)
		require.Contains(t, want, `{"path":"a.go"}`)
		require.Contains(t, want, "cost 0.5")
		require.Contains(t, want, "request-id=req-1")
		for i := range got {
			m := &got[i]
			for j := range m.Content {
				m.Content[j].Text = "changed"
				if len(m.Content[j].Arguments) > 0 {
					m.Content[j].Arguments[0] = 'X'
				}
			}
			if m.Usage != nil {
				m.Usage.Input = -1
				if m.Usage.Cost != nil {
					m.Usage.Cost.Total = -1
				}
			}
			for k := range m.Headers {
				m.Headers[k] = "changed"
			}
		}
		assert.Equal(t, want, held(s.Messages()))
	})
}
