package policy_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/policy"
)

func TestDefaultConfig(t *testing.T) {
	cfg := policy.DefaultConfig()
	require.NoError(t, cfg.Validate())
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"retry":{"enabled":true,"maxRetries":3,"baseDelayMs":2000,"maxDelayMs":60000,"jitter":0,"honorRetryAfter":true,"rules":"extended","maxResetWaitMs":18000000},
		"compaction":{"enabled":true,"reserveTokens":16384,"keepRecentTokens":20000}}`, string(b))
}

// The reference's policy, exactly: the reference's three keys with its
// defaults, and the library's four keys set to what the reference does.
func TestReferenceConfig(t *testing.T) {
	cfg := policy.ReferenceConfig()
	require.NoError(t, cfg.Validate())
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"retry":{"enabled":true,"maxRetries":3,"baseDelayMs":2000,"maxDelayMs":0,"jitter":0,"honorRetryAfter":false,"rules":"seed"},
		"compaction":{"enabled":true,"reserveTokens":16384,"keepRecentTokens":20000}}`, string(b))
	cfg.Retry.MaxDelayMs = 1
	assert.Zero(t, policy.ReferenceConfig().Retry.MaxDelayMs, "each call returns a fresh value")
}

func TestParseConfig(t *testing.T) {
	cfg, err := policy.ParseConfig([]byte(`{"retry":{"maxRetries":5,"rules":"extended"},"compaction":{"enabled":false}}`))
	require.NoError(t, err)
	want := policy.DefaultConfig()
	want.Retry.MaxRetries = 5
	want.Retry.Rules = classify.Extended
	want.Compaction.Enabled = false
	assert.Equal(t, want, cfg, "keys left out keep their defaults")

	cases := []struct{ json, says string }{
		{`{"retry":{"maxRetries":-1}}`, "retry.maxRetries -1 (no count limit) needs a time budget: retry.maxElapsedMs above 0"},
		{`{"retry":{"maxRetries":-1,"maxElapsedMs":0}}`, "retry.maxRetries -1 (no count limit) needs a time budget"},
		{`{"retry":{"maxRetries":-1,"maxElapsedMs":60000,"baseDelayMs":0}}`, "retry.baseDelayMs must be above 0 with retry.maxRetries -1"},
		{`{"retry":{"maxRetries":-2,"maxElapsedMs":1000}}`, "retry.maxRetries must be -1 (no count limit) or more, got -2"},
		{`{"retry":{"maxElapsedMs":-1}}`, "retry.maxElapsedMs must not be negative, got -1"},
		{`{"retry":{"maxElapsedMs":1.5}}`, "retry.maxElapsedMs must be an integer in range, got 1.5"},
		{`{"retry":{"maxElapsedMs":"60000"}}`, "retry.maxElapsedMs has the wrong type"},
		{`{"retry":{"maxElapsedMs":null}}`, "retry.maxElapsedMs must not be null"},
		{`{"retry":{"maxElapsedMs":99999999999999999999}}`, "retry.maxElapsedMs must be an integer in range"},
		{`{"retry":{"maxElapsedMs":1,"maxElapsedMs":2}}`, "retry.maxElapsedMs appears twice"},
		{`{"retry":{"maxElapsedMS":1}}`, `unknown key "retry.maxElapsedMS"`},
		{`{"retry":{"baseDelayMs":-5}}`, "retry.baseDelayMs"},
		{`{"retry":{"maxDelayMs":-5}}`, "retry.maxDelayMs"},
		{`{"retry":{"maxResetWaitMs":-1}}`, "retry.maxResetWaitMs must not be negative, got -1"},
		{`{"retry":{"waitForReset":"yes"}}`, "retry.waitForReset has the wrong type"},
		{`{"retry":{"jitter":1.5}}`, "retry.jitter must be between 0 and 1"},
		{`{"retry":{"jitter":-0.1}}`, "retry.jitter"},
		{`{"retry":{"rules":"strict"}}`, "retry.rules must be seed or extended"},
		{`{"compaction":{"reserveTokens":-1}}`, "compaction.reserveTokens"},
		{`{"compaction":{"keepRecentTokens":-1}}`, "compaction.keepRecentTokens"},
		{`{"retry":{"maxRetry":3}}`, `unknown key "retry.maxRetry"`},
		{`{"retries":{}}`, `unknown key "retries"`},
		{`{"retry":5}`, "retry must be an object"},
		{`{"retry":{"maxRetries":"3"}}`, "retry.maxRetries has the wrong type"},
		{`{"retry":{"enabled":1}}`, "retry.enabled has the wrong type"},
		{`{"retry":`, "end early"},
		{`{"retry":{}} {}`, "text after"},
		{`nope`, "not valid JSON"},
	}
	for _, c := range cases {
		_, err := policy.ParseConfig([]byte(c.json))
		require.Error(t, err, c.json)
		assert.ErrorIs(t, err, policy.ErrInvalidConfig, c.json)
		assert.Contains(t, err.Error(), c.says, c.json)
	}
}

// Issue 24 §1: maxRetries -1 is no count limit, which needs a time budget;
// a budget alone bounds a chain too, and 0 (the default) is none.
func TestParseConfigTimeBudget(t *testing.T) {
	cfg, err := policy.ParseConfig([]byte(`{"retry":{"maxRetries":-1,"maxElapsedMs":600000}}`))
	require.NoError(t, err)
	assert.Equal(t, -1, cfg.Retry.MaxRetries)
	assert.Equal(t, int64(600000), cfg.Retry.MaxElapsedMs)
	cfg, err = policy.ParseConfig([]byte(`{"retry":{"maxElapsedMs":5000}}`))
	require.NoError(t, err)
	assert.Equal(t, 3, cfg.Retry.MaxRetries, "a budget beside the count: whichever comes first")
	assert.Zero(t, policy.DefaultConfig().Retry.MaxElapsedMs, "no time budget by default")
	assert.Zero(t, policy.ReferenceConfig().Retry.MaxElapsedMs)

	// The setting is left out of the JSON when 0: a config (in a snapshot)
	// written before it existed reads the same, and the reference's JSON
	// is as it was (TestReferenceConfig).
	b, err := json.Marshal(policy.PatientConfig())
	require.NoError(t, err)
	assert.Contains(t, string(b), `"maxRetries":-1,"maxElapsedMs":1800000`)
}

// Issue 24 §1: the patient preset: no count limit, a 30-minute budget,
// delays capped at 60 s, the rest as DefaultConfig; it is valid and reads
// back through ParseConfig.
func TestPatientConfig(t *testing.T) {
	want := policy.DefaultConfig()
	want.Retry.MaxRetries, want.Retry.MaxElapsedMs, want.Retry.MaxDelayMs = -1, 30*60*1000, 60000
	assert.Equal(t, want, policy.PatientConfig())
	require.NoError(t, policy.PatientConfig().Validate())
	b, err := json.Marshal(policy.PatientConfig())
	require.NoError(t, err)
	back, err := policy.ParseConfig(b)
	require.NoError(t, err)
	assert.Equal(t, policy.PatientConfig(), back)
}

// issue item 16: a null is a type error naming its dotted key, and
// settings that are not an object are refused as a whole; no garbage shape
// is accepted or answered with an empty key name.
func TestParseConfigRejectsNullsAndNonObjects(t *testing.T) {
	cases := []struct{ json, says string }{
		{`null`, "the settings must be a JSON object, got null"},
		{` null `, "the settings must be a JSON object, got null"},
		{`[]`, "the settings must be a JSON object, got an array"},
		{`[{"retry":{}}]`, "the settings must be a JSON object, got an array"},
		{`3`, "the settings must be a JSON object, got a number"},
		{`"retry"`, "the settings must be a JSON object, got a string"},
		{`true`, "the settings must be a JSON object, got a boolean"},
		{``, "the settings are empty"},
		{"  \n\t", "the settings are empty"},
		{`{"retry":null}`, "retry must not be null"},
		{`{"compaction":null}`, "compaction must not be null"},
		{`{"retry":[]}`, "retry must be an object, got an array"},
		{`{"retry":"x"}`, "retry must be an object, got a string"},
		{`{"retry":{"enabled":null}}`, "retry.enabled must not be null"},
		{`{"retry":{"maxRetries":null}}`, "retry.maxRetries must not be null"},
		{`{"retry":{"rules":null}}`, "retry.rules must not be null"},
		{`{"retry":{"jitter":null}}`, "retry.jitter must not be null"},
		{`{"compaction":{"keepRecentTokens":null}}`, "compaction.keepRecentTokens must not be null"},
		{`{"retry":{"maxRetries":1,"maxRetries":null}}`, "retry.maxRetries must not be null"},
		{`{"retry":{"maxRetries":1.5}}`, "retry.maxRetries must be an integer in range, got 1.5"},
		{`{"retry":{"maxRetries":1e3}}`, "retry.maxRetries must be an integer in range, got 1e3"},
		{`{"retry":{"baseDelayMs":99999999999999999999}}`, "retry.baseDelayMs must be an integer in range"},
		{`{"retry":{"jitter":1e400}}`, "retry.jitter must be a number in range, got 1e400"},
		{`{"retry":{"rules":5}}`, "retry.rules has the wrong type"},
		{`{"retry":{"enabled":"true"}}`, "retry.enabled has the wrong type"},
		{`{"Retry":{}}`, `unknown key "Retry"`},
		{`{"retry":{"MaxRetries":5}}`, `unknown key "retry.MaxRetries"`},
		{`{"retry":{}`, "the settings end early"},
		{`{"retry":null} {}`, "text after the settings"},
		{`{"retry":{}} x`, "text after the settings"},
		{`{,}`, "the settings are not valid JSON"},
	}
	for _, c := range cases {
		cfg, err := policy.ParseConfig([]byte(c.json))
		require.Error(t, err, "%q", c.json)
		assert.Equal(t, policy.Config{}, cfg, c.json)
		assert.ErrorIs(t, err, policy.ErrInvalidConfig, c.json)
		assert.Contains(t, err.Error(), c.says, "%q", c.json)
		assert.NotContains(t, err.Error(), ":  ", "%q: an empty name", c.json)
	}
}

// issue item 5: every occurrence of a key counts. A null hidden behind a
// second occurrence of its key is still a null, and a key given twice is
// refused by name rather than resolved by whichever came last.
func TestParseConfigDuplicateKeys(t *testing.T) {
	cases := []struct{ json, says string }{
		{`{"retry":null,"retry":{}}`, "retry must not be null"},
		{`{"retry":{"maxRetries":null,"maxRetries":5}}`, "retry.maxRetries must not be null"},
		{`{"retry":{"enabled":null,"enabled":true}}`, "retry.enabled must not be null"},
		{`{"retry":{"rules":null,"rules":"seed"}}`, "retry.rules must not be null"},
		{`{"compaction":{"enabled":null,"enabled":false}}`, "compaction.enabled must not be null"},
		{`{"retry":{},"retry":null}`, "retry must not be null"},
		{`{"retry":{"maxRetries":5,"maxRetries":5}}`, "retry.maxRetries appears twice"},
		{`{"retry":{"maxRetries":5},"retry":{}}`, "retry appears twice"},
		{`{"retry":{},"compaction":{},"retry":{}}`, "retry appears twice"},
		{`{"retry":{"rules":"seed","rul\u0065s":"extended"}}`, "retry.rules appears twice"},
		{`{"retry":{"jitter":0},"compaction":{"reserveTokens":1,"keepRecentTokens":2,"reserveTokens":1}}`,
			"compaction.reserveTokens appears twice"},
	}
	for _, c := range cases {
		cfg, err := policy.ParseConfig([]byte(c.json))
		require.Error(t, err, "%q", c.json)
		assert.Equal(t, policy.Config{}, cfg, c.json)
		assert.ErrorIs(t, err, policy.ErrInvalidConfig, c.json)
		assert.Contains(t, err.Error(), c.says, "%q", c.json)
	}

	// The same key in two groups is two keys.
	cfg, err := policy.ParseConfig([]byte(`{"retry":{"enabled":false},"compaction":{"enabled":false}}`))
	require.NoError(t, err)
	assert.False(t, cfg.Retry.Enabled)
	assert.False(t, cfg.Compaction.Enabled)
}
