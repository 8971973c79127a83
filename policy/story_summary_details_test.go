package policy_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// A summary's details reach the compaction's entry as the summarizer gave
// them when JSON carries their text as it is; with text the rule of
// package wiretext changes (a lone surrogate's escape), as their JSON so
// changed; none stay none; and
// details JSON cannot write fail the compaction, saying why.
func TestStorySummaryDetails(t *testing.T) {
	type files struct {
		Read []string `json:"read"`
	}
	compacting := with(warmUp, []step{
		{in: promptIn(secondQuestion), want: []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}},
		{in: reply(okAnswer("second answer")), want: []string{
			"message msg-4 stop", "append message:msg-4", "agent_end [msg-4]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: compactIn(""), want: []string{"start_compaction manual cut=[user-1 msg-2] kept=[user-3 msg-4] max=170000", "idle>compacting compact"}},
	})
	// entry finishes the compaction with details and returns the entry it
	// writes, nil when it writes none.
	entry := func(t *testing.T, details any) (*transcript.Compaction, []policy.Effect) {
		p := play(t, story{setup: smallKeep, steps: compacting})
		effects := p.e.CompactionFinished(p.now, p.comp, policy.Summary{Text: "sum", Details: details}, nil)
		for _, ef := range effects {
			if ef.Kind == policy.Append {
				require.Len(t, ef.Entries, 1)
				return ef.Entries[0].Compaction, effects
			}
		}
		return nil, effects
	}

	t.Run("valid text: as given", func(t *testing.T) {
		given := &files{Read: []string{"a.go", "é.go"}}
		c, _ := entry(t, given)
		require.NotNil(t, c)
		assert.Same(t, given, c.Details)
	})
	t.Run("none: none", func(t *testing.T) {
		c, _ := entry(t, nil)
		require.NotNil(t, c)
		assert.Nil(t, c.Details)
	})
	t.Run("a lone surrogate: its JSON, mended", func(t *testing.T) {
		c, _ := entry(t, json.RawMessage(`{"read":["a\ud800b.go"]}`))
		require.NotNil(t, c)
		raw, ok := c.Details.(json.RawMessage)
		require.True(t, ok, "details %T %#v", c.Details, c.Details)
		assert.JSONEq(t, `{"read":["a\ufffdb.go"]}`, string(raw))
	})
	t.Run("JSON cannot write them: the compaction fails", func(t *testing.T) {
		c, effects := entry(t, map[string]any{"ch": make(chan int)})
		assert.Nil(t, c, "no entry written")
		var failed bool
		for _, ef := range effects {
			if ef.Kind == policy.FinishCompact {
				failed = true
				assert.ErrorContains(t, ef.Err, "policy: the summary's details cannot be written as JSON")
			}
		}
		assert.True(t, failed, "the manual compaction finishes with the error")
	})
}
