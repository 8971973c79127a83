package policy_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
)

// The moves a session cannot be driven through from outside, and the
// internal rules, taken on the engine.

// Abort while the decision waits for the credential store: the decision
// is dropped, the turn fails as aborted, and the store's late answer
// changes nothing.
func TestEngineAbortWhileTheStoreIsAsked(t *testing.T) {
	e := newEngine(t, func(s *policy.Setup) { s.Credentials = true })
	_, run := prompt(t, e, t0)
	lines := call(e, t0, run, answer(transcript.StopReasonError, "429 usage limit reached"))
	require.Contains(t, lines, "mark_usage_limit 0s")
	require.Equal(t, states.Classifying, e.Status().State)
	assert.Equal(t, []string{
		"state classifying>cancelled cancel",
		"state cancelled>idle reset",
		"turn_settled false",
		"finish_turn policy: aborted",
	}, describe(e.Abort(t0, errors.New("user"))))
	assert.Empty(t, describe(e.UsageLimitAnswered(t0, true)), "the answer comes too late to decide anything")
	assert.Equal(t, states.Idle, e.Status().State)
	assert.False(t, e.Status().Streaming)
}

// A user's run that produced no assistant message fails its turn without
// leaving idle (start_failed is internal there).
func TestEngineUserRunThatCannotStart(t *testing.T) {
	e := newEngine(t, nil)
	_, run := prompt(t, e, t0)
	assert.Equal(t, []string{
		"turn_settled false",
		"finish_turn policy: run could not start: no route to host",
	}, describe(e.RunReturned(t0, run, policy.RunReturn{Err: errors.New("no route to host")})))
	assert.Equal(t, states.Idle, e.Status().State)
}

// Compact during a backoff: the chain ends as cancelled, the turn fails
// with ErrRetryCancelled and settles at once, and the compaction runs.
func TestEngineCompactDuringBackoff(t *testing.T) {
	e := newEngine(t, func(s *policy.Setup) { s.Config.Compaction.KeepRecentTokens = 5 })
	_, run := prompt(t, e, t0)
	call(e, t0, run, answer(transcript.StopReasonStop, "a first answer, long enough"))
	_, run = prompt(t, e, t0)
	call(e, t0, run, answer(transcript.StopReasonError, "503 Service Unavailable"))
	require.Equal(t, states.Backoff, e.Status().State)
	effects, err := e.Compact(t0.Add(time.Second), "")
	require.NoError(t, err)
	assert.Equal(t, []string{
		"stop_timer",
		"retry_end false 1 Retry cancelled",
		"start_compaction 4 cut=1 kept=2",
		"state backoff>compacting compact_in_backoff",
		"turn_settled false",
		"finish_turn policy: retry cancelled",
	}, describe(effects))
	assert.Equal(t, states.Compacting, e.Status().State)
	e.CompactionFinished(t0, compactionIn(t, effects), policy.Summary{Text: "summary"}, nil)
	assert.Equal(t, []string{"finish_compact <nil>", "state compacting>idle compaction_end"}, describe(e.Appended(t0, nil)))
}

// Compact with nothing added since the last compaction is refused by an
// internal rule: no move, only Compact's error.
func TestEngineCompactRefused(t *testing.T) {
	e := newEngine(t, func(s *policy.Setup) { s.Config.Compaction.KeepRecentTokens = 5 })
	_, run := prompt(t, e, t0)
	call(e, t0, run, answer(transcript.StopReasonStop, "a first answer, long enough"))
	effects, err := e.Compact(t0, "")
	require.NoError(t, err)
	e.CompactionFinished(t0, compactionIn(t, effects), policy.Summary{Text: "summary"}, nil)
	e.Appended(t0, nil)
	effects, err = e.Compact(t0, "")
	require.ErrorIs(t, err, policy.ErrAlreadyCompacted)
	assert.Equal(t, []string{"finish_compact policy: already compacted"}, describe(effects))
	assert.Equal(t, states.Idle, e.Status().State)

	// Nothing to compact: the compaction starts and ends at once.
	e = newEngine(t, nil)
	effects, err = e.Compact(t0, "")
	require.ErrorIs(t, err, policy.ErrNothingToCompact)
	assert.Equal(t, []string{"finish_compact policy: nothing to compact", "state idle>compacting compact", "state compacting>idle compaction_end"}, describe(effects))
	assert.Equal(t, states.Idle, e.Status().State)
}

// A reply that succeeds ends the chain at once, before the run ends, and
// clears the overflow episode; an error reply does neither.
func TestEngineReplyEndsTheChain(t *testing.T) {
	e := newEngine(t, nil)
	_, run := prompt(t, e, t0)
	call(e, t0, run, answer(transcript.StopReasonError, "503 Service Unavailable"))
	effects := e.TimerFired(t0.Add(2*time.Second), 2)
	run = runOf(t, effects)
	assert.Equal(t, []string{"append message await=false"}, describe(e.RunEvent(t0, run, events.MessageEnd{Message: answer(transcript.StopReasonError, "503 again")})))
	assert.Equal(t, 1, e.Status().Attempt)
	assert.Equal(t, []string{"retry_end true 1 ", "append message await=false"}, describe(e.RunEvent(t0, run, events.MessageEnd{Message: answer(transcript.StopReasonStop, "done")})))
	assert.Equal(t, 0, e.Status().Attempt)
	assert.Equal(t, states.Continuing, e.Status().State, "reply is internal: the machine stays")
}

// A manual compaction in flight is its caller's: a snapshot taken then is
// of a session at rest, which resumes idle with nothing in flight, and
// Abort cancels the compaction through the table (cancel from compacting).
func TestEngineManualCompactionSnapshotAndAbort(t *testing.T) {
	cfg := policy.DefaultConfig()
	cfg.Compaction.KeepRecentTokens = 5
	d := newDriver(t, cfg)
	effects, err := d.e.Prompt(t0, "hi")
	require.NoError(t, err)
	d.feed(effects)
	d.answerRun(t0, answer(transcript.StopReasonStop, "a first answer, long enough"), 0)
	require.True(t, d.settled)

	effects, err = d.e.Compact(t0, "")
	require.NoError(t, err)
	d.feed(effects)
	require.Equal(t, states.Compacting, d.e.Status().State)
	snap := d.e.Snapshot()
	assert.Equal(t, states.Idle, snap.State, "the manual compaction is not part of the snapshot")
	assert.Empty(t, snap.InFlight)
	r := d.resumed(t, t0, 0)
	assert.Equal(t, states.Idle, r.e.Status().State)
	assert.False(t, r.e.Status().Compacting)
	assert.Empty(t, r.events)

	assert.Equal(t, []string{"cancel_compaction 2", "finish_compact policy: compaction cancelled", "state compacting>cancelled cancel", "state cancelled>idle reset"},
		describe(d.e.Abort(t0, errors.New("user"))))
	assert.False(t, d.e.Status().Compacting)
	assert.Empty(t, describe(d.e.CompactionFinished(t0, 2, policy.Summary{Text: "late"}, nil)), "a late summary changes nothing")
	assert.Equal(t, states.Idle, d.e.Status().State)
}

// Prompt while a manual compaction runs is refused; so is Compact while
// the check before a prompt compacts.
func TestEngineManualCompactionIsExclusive(t *testing.T) {
	e := newEngine(t, func(s *policy.Setup) { s.Config.Compaction.KeepRecentTokens = 5 })
	_, run := prompt(t, e, t0)
	call(e, t0, run, answer(transcript.StopReasonStop, "a first answer, long enough"))
	_, err := e.Compact(t0, "")
	require.NoError(t, err)
	_, err = e.Prompt(t0, "again")
	require.ErrorIs(t, err, policy.ErrBusy)
	_, err = e.Compact(t0, "")
	require.ErrorIs(t, err, policy.ErrBusy)
}
