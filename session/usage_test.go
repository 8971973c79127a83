package session_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// issue item 24: a usage whose parts add up past the int range is over the
// compaction threshold, not a negative size below it.
func TestHugeUsageIsOverTheThreshold(t *testing.T) {
	bubble(t, func(t *testing.T) {
		huge := scripted.Call{StopReason: "stop", Text: "done", Usage: &session.Usage{Input: 100, Output: 1 << 62, CacheWrite: 1 << 62}}
		s, _, rec := newSession(t, []scripted.Call{huge})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		r := rec.recovery()
		require.NotEmpty(t, r)
		assert.Equal(t, "compaction_start threshold", r[0])
	})
}
