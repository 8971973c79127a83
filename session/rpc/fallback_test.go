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

// get_state names the model the session's runs call and when its
// fallback's cooldown ends; model_fallback says the switch on the wire.
func TestFallbackOverRPC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.DefaultConfig()
		cfg.Fallback = &policy.FallbackConfig{Models: []policy.FallbackModel{{ID: "fallback-model"}}, After: "overloaded", CooldownMs: 60_000}
		sv := serve(t, []scripted.Call{
			{StopReason: "error", ErrorMessage: "529 overloaded_error: Overloaded"},
			{StopReason: "stop", Text: "done"},
		}, session.WithConfig(cfg))
		c := rpc.NewClient(sv.out, sv.in)
		defer c.Close()
		ctx := context.Background()
		start := time.Now()
		require.NoError(t, c.Prompt(ctx, "hi"))
		require.NoError(t, c.WaitForIdle(ctx))
		until := start.Add(time.Minute).UTC()
		st, err := c.GetState(ctx)
		require.NoError(t, err)
		assert.Equal(t, "fallback-model", st.ActiveModel)
		assert.Equal(t, until.Format("2006-01-02T15:04:05.000Z07:00"), st.FallbackUntil)
		assert.Equal(t, until.UnixMilli(), st.FallbackUntilMs)
		var fell *events.ModelFallback
		for _, ev := range drain(c) {
			v, err := ev.Value()
			require.NoError(t, err)
			if f, ok := v.(events.ModelFallback); ok {
				fell = &f
			}
		}
		require.NotNil(t, fell, "a model_fallback event")
		assert.Equal(t, "fallback-model", fell.To)
		assert.Equal(t, events.FallbackOverloaded, fell.Reason)
	})
}
