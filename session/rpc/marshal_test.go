package rpc_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// TestMarshalEventIsTheServersLine: a program logging events writes the
// server's line, which a client decodes back into the event. Issue item 4.
func TestMarshalEventIsTheServersLine(t *testing.T) {
	ev := events.AutoRetryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 5, ErrorMessage: "529 overloaded_error: Overloaded"}
	b, err := rpc.MarshalEvent(ev)
	require.NoError(t, err)
	assert.Equal(t, `{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":5,"errorMessage":"529 overloaded_error: Overloaded"}`, string(b))
	back, err := rpc.Event{Type: rpc.EventType(ev), Raw: b}.Value()
	require.NoError(t, err)
	assert.Equal(t, ev, back)

	_, err = rpc.MarshalEvent(nil)
	require.ErrorContains(t, err, "rpc: not a session event")
}

// TestStateChangeBeforeTheRenameStillReads: the rule that takes a run's
// outcome as it is was named "settle" before it was "accept". A line a
// server of then wrote, logged and read back now, decodes to the rule's
// name today; every other name reads as it is written.
func TestStateChangeBeforeTheRenameStillReads(t *testing.T) {
	old := rpc.Event{Type: "state_change", Raw: []byte(`{"type":"state_change","from":"classifying","to":"idle","event":"settle"}`)}
	ev, err := old.Value()
	require.NoError(t, err)
	assert.Equal(t, events.StateChange{From: states.Classifying, To: states.Idle, Trigger: transitions.Accept}, ev)

	for _, r := range transitions.Table() {
		for _, from := range r.From {
			sc := events.StateChange{From: from, To: r.Target(from), Trigger: r.Trigger}
			b, err := rpc.MarshalEvent(sc)
			require.NoError(t, err)
			back, err := rpc.Event{Type: "state_change", Raw: b}.Value()
			require.NoError(t, err)
			assert.Equal(t, sc, back)
		}
	}
	unknown := rpc.Event{Type: "state_change", Raw: []byte(`{"type":"state_change","from":"idle","to":"idle","event":"warp"}`)}
	ev, err = unknown.Value()
	require.NoError(t, err)
	assert.Equal(t, events.StateChange{From: states.Idle, To: states.Idle, Trigger: "warp"}, ev, "a name this client does not know is kept as it came")
}
