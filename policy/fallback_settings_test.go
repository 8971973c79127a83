package policy_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/policy"
)

// The fallback models as the settings give them, read by ParseConfig and by
// encoding/json alone (an embedder's own settings may hold a
// FallbackConfig): an ID, or an object with "id" and "contextWindow".
func TestFallbackModelsAsSettingsGiveThem(t *testing.T) {
	cfg, err := policy.ParseConfig([]byte(`{"fallback":{"models":["b",{"id":"c","contextWindow":1000},{"id":"d"}]}}`))
	require.NoError(t, err)
	require.NotNil(t, cfg.Fallback)
	assert.Equal(t, []policy.FallbackModel{{ID: "b"}, {ID: "c", ContextWindow: 1000}, {ID: "d"}}, cfg.Fallback.Models)

	var fc policy.FallbackConfig
	require.NoError(t, json.Unmarshal([]byte(`{"models":[" b ",{"contextWindow":7,"id":"c"}]}`), &fc))
	assert.Equal(t, []policy.FallbackModel{{ID: " b "}, {ID: "c", ContextWindow: 7}}, fc.Models)

	for _, c := range []struct{ json, says string }{
		{`{"models":[{"id":"c","window":7}]}`, `unknown key "fallback.models.window"`},
		{`{"models":[{"contextWindow":7,"id":"c","extra":1}]}`, `unknown key "fallback.models.extra"`},
		{`{"models":[{"id":null}]}`, "fallback.models.id must not be null"},
		{`{"models":[7]}`, "got a number"},
		{`{"models":[[]]}`, "got an array"},
		{`{"models":[{"id":"c","contextWindow":"7"}]}`, "fallback.models.contextWindow has the wrong type"},
	} {
		var fc policy.FallbackConfig
		err := json.Unmarshal([]byte(c.json), &fc)
		require.Error(t, err, c.json)
		assert.ErrorIs(t, err, policy.ErrInvalidConfig, c.json)
		assert.Contains(t, err.Error(), c.says, c.json)
	}

	// Called by hand on nothing, or on a string JSON cannot read, it says
	// so rather than panic.
	var m policy.FallbackModel
	for _, c := range []struct{ data, says string }{
		{"", "got nothing"},
		{"  \n", "got nothing"},
		{`"b`, "a model is not a valid JSON string"},
		{`"\x"`, "a model is not a valid JSON string"},
	} {
		err := m.UnmarshalJSON([]byte(c.data))
		require.Error(t, err, "%q", c.data)
		assert.ErrorIs(t, err, policy.ErrInvalidConfig)
		assert.Contains(t, err.Error(), c.says, "%q", c.data)
	}
	assert.Equal(t, policy.FallbackModel{}, m, "a refused model leaves the value as it was")
}

// An invalid fallback model is named by its place in the list, counted
// from 1; a model named twice, by both places.
func TestFallbackModelsNamedByPlace(t *testing.T) {
	for _, c := range []struct{ json, says string }{
		{`{"fallback":{"models":[{"id":"b","contextWindow":-1}]}}`, "fallback.models.contextWindow must not be negative, got -1 (model 1 of the list)"},
		{`{"fallback":{"models":["a","b",{"id":"c","contextWindow":-5}]}}`, "got -5 (model 3 of the list)"},
		{`{"fallback":{"models":["a","b"," ","c"]}}`, "fallback.models.id must not be empty (model 3 of the list)"},
		{`{"fallback":{"models":["b","b"]}}`, `fallback.models names "b" twice (models 1 and 2 of the list)`},
		{`{"fallback":{"models":["a","b","c","b"]}}`, `fallback.models names "b" twice (models 2 and 4 of the list)`},
	} {
		_, err := policy.ParseConfig([]byte(c.json))
		require.Error(t, err, c.json)
		assert.ErrorIs(t, err, policy.ErrInvalidConfig, c.json)
		assert.Contains(t, err.Error(), c.says, c.json)
	}
}

// Zero is a setting at the edge of every "must not be negative": it is
// valid, and kept as given.
func TestConfigZeroIsNotNegative(t *testing.T) {
	cfg, err := policy.ParseConfig([]byte(`{"retry":{"maxResetWaitMs":0},"compaction":{"reserveTokens":0,"keepRecentTokens":0},"fallback":{"models":[{"id":"b","contextWindow":0}],"cooldownMs":0}}`))
	require.NoError(t, err)
	assert.Zero(t, cfg.Compaction.KeepRecentTokens)
	assert.Zero(t, cfg.Compaction.ReserveTokens)
	assert.Zero(t, cfg.Retry.MaxResetWaitMs)
	c := policy.DefaultConfig()
	c.Compaction.KeepRecentTokens = 0
	assert.NoError(t, c.Validate())
}
