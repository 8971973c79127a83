package rpc_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/session/rpc"
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
