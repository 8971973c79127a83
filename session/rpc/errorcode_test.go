package rpc_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/rpc"
)

// coded is a driver's error that carries its own turn_settled code.
type coded string

func (c coded) Error() string     { return "the driver's own error" }
func (c coded) ErrorCode() string { return string(c) }

// An error that carries its own code gives it in turn_settled, ahead of
// the sentinel beside it (a run that could not start because of it); one
// whose code is empty leaves the sentinels to say.
func TestErrorCodeOfACodedError(t *testing.T) {
	err := fmt.Errorf("%w: %w", policy.ErrStartFailed, coded("payload_too_large"))
	assert.Equal(t, "payload_too_large", rpc.ErrorCode(err))
	line, merr := rpc.MarshalEvent(events.TurnSettled{Err: err})
	assert.NoError(t, merr)
	assert.Contains(t, string(line), `"code":"payload_too_large"`)
	assert.Equal(t, "start_failed", rpc.ErrorCode(fmt.Errorf("%w: %w", policy.ErrStartFailed, coded(""))))
	assert.Equal(t, "aborted", rpc.ErrorCode(errors.Join(policy.ErrAborted)))
}
