package temporal

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

// played plays sc in process and returns the history it wrote.
func played(t *testing.T, sc scenarios.Scenario) []transcript.Entry {
	var out []transcript.Entry
	synctest.Test(t, func(t *testing.T) {
		h := &history.MemoryHistory{}
		s, err := session.New(scripted.New(sc.Script()), session.WithHistory(h), session.WithModel(scenarios.Model),
			session.WithConfig(sc.Config()), session.WithRandom(scenarios.Draw))
		require.NoError(t, err)
		for _, p := range sc.Prompts {
			_ = s.Prompt(context.Background(), p)
		}
		require.NoError(t, s.Close())
		for e, err := range h.Entries() {
			require.NoError(t, err)
			out = append(out, e)
		}
	})
	return out
}

// A shortened history rebuilds an engine that answers every input as the
// whole history's does: the same runtime context, the same effects for a
// prompt (whose check reads positions), the same IDs for what it adds,
// the same answer to a compaction.
func TestShortenRebuildsTheSameEngine(t *testing.T) {
	for _, sc := range scenarios.All() {
		t.Run(sc.Name, func(t *testing.T) {
			whole := played(t, sc)
			setup := policy.Setup{SessionID: "s", Model: scenarios.Model, Config: sc.Config()}
			setup.History = whole
			a, err := policy.New(setup)
			require.NoError(t, err)
			short := shorten(whole, a.Messages())
			assert.LessOrEqual(t, len(short), len(whole)+1)
			setup.History = short
			b, err := policy.New(setup)
			require.NoError(t, err)
			assert.Equal(t, a.Messages(), b.Messages())
			at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			ea, erra := a.Prompt(at, "one more")
			eb, errb := b.Prompt(at, "one more")
			assert.Equal(t, erra, errb)
			assert.Equal(t, ea, eb)
			ca, erra := a.Compact(at, "")
			cb, errb := b.Compact(at, "")
			assert.Equal(t, erra, errb)
			assert.Equal(t, ca, cb)
		})
	}
}

// A history with nothing dropped needs no removal entry: the IDs it keeps
// carry the counter.
func TestShortenKeepsWhatTheContextHolds(t *testing.T) {
	m := func(id string) transcript.Message {
		return transcript.Message{ID: id, Role: transcript.RoleUser, Content: transcript.TextContent(id)}
	}
	u1, u2 := m("user-1"), m("user-2")
	whole := []transcript.Entry{
		{Type: transcript.EntryMessage, ID: u1.ID, Message: &u1},
		{Type: transcript.EntryMessage, ID: u2.ID, Message: &u2},
	}
	assert.Equal(t, whole, shorten(whole, []transcript.Message{u1, u2}))
	// A removed message goes, and its number stays.
	removed := append(whole, transcript.Entry{Type: transcript.EntryRemoval, ID: u2.ID})
	assert.Equal(t, []transcript.Entry{{Type: transcript.EntryRemoval, ID: u2.ID}, whole[0]}, shorten(removed, []transcript.Message{u1}))
}
