package session_test

import (
	"context"
	"encoding/json"
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
