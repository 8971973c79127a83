package rpc_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// A usage limit whose reset is known, under retry.waitForReset: the wire
// says when it resets (auto_retry_start's resetAt and resetAtMs, get_state's
// during the wait), the continuation goes at the reset, and auto_retry_end
// says the chain waited for it.
func TestResetWaitOverRPC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.DefaultConfig()
		cfg.Retry.WaitForReset = true
		sv := serve(t, []scripted.Call{
			{StopReason: "error", ErrorMessage: "usage limit reached, retry-after: 7200"},
			{StopReason: "stop", Text: "done"},
		}, session.WithConfig(cfg))
		c := rpc.NewClient(sv.out, sv.in)
		defer c.Close()
		ctx := context.Background()
		start := time.Now()
		reset := start.Add(2 * time.Hour).UTC().Truncate(time.Millisecond)
		require.NoError(t, c.Prompt(ctx, "hi"))
		time.Sleep(time.Hour)
		st, err := c.GetState(ctx)
		require.NoError(t, err)
		assert.Equal(t, "backoff", st.State)
		assert.Equal(t, reset.Format("2006-01-02T15:04:05.000Z07:00"), st.ResetAt)
		assert.Equal(t, reset.UnixMilli(), st.ResetAtMs)

		require.NoError(t, c.WaitForIdle(ctx))
		assert.Equal(t, 2*time.Hour, time.Since(start), "the turn went on at the reset, not before")
		var retryStart events.AutoRetryStart
		var retryEnd events.AutoRetryEnd
		for _, ev := range drain(c) {
			v, err := ev.Value()
			require.NoError(t, err)
			switch v := v.(type) {
			case events.AutoRetryStart:
				retryStart = v
			case events.AutoRetryEnd:
				retryEnd = v
			}
		}
		assert.Equal(t, reset, retryStart.ResetAt)
		assert.Equal(t, int64(7200000), retryStart.DelayMs)
		assert.True(t, retryEnd.Success)
		assert.True(t, retryEnd.ResetWait)

		st, err = c.GetState(ctx)
		require.NoError(t, err)
		assert.Empty(t, st.ResetAt, "no reset waited for once idle")
		assert.Zero(t, st.ResetAtMs)
	})
}
