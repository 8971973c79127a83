package session_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

func TestDefaultConfig(t *testing.T) {
	cfg := session.DefaultConfig()
	require.NoError(t, cfg.Validate())
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"retry":{"enabled":true,"maxRetries":3,"baseDelayMs":2000,"maxDelayMs":0,"jitter":0,"honorRetryAfter":false,"rules":"seed"},
		"compaction":{"enabled":true,"reserveTokens":16384,"keepRecentTokens":20000}}`, string(b))
}

func TestParseConfig(t *testing.T) {
	cfg, err := session.ParseConfig([]byte(`{"retry":{"maxRetries":5,"rules":"extended"},"compaction":{"enabled":false}}`))
	require.NoError(t, err)
	want := session.DefaultConfig()
	want.Retry.MaxRetries = 5
	want.Retry.Rules = classify.Extended
	want.Compaction.Enabled = false
	assert.Equal(t, want, cfg, "keys left out keep their defaults")

	cases := []struct{ json, says string }{
		{`{"retry":{"maxRetries":-1}}`, "retry.maxRetries must not be negative"},
		{`{"retry":{"baseDelayMs":-5}}`, "retry.baseDelayMs"},
		{`{"retry":{"maxDelayMs":-5}}`, "retry.maxDelayMs"},
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
		_, err := session.ParseConfig([]byte(c.json))
		require.Error(t, err, c.json)
		assert.ErrorIs(t, err, session.ErrInvalidConfig, c.json)
		assert.Contains(t, err.Error(), c.says, c.json)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	cfg := session.DefaultConfig()
	cfg.Retry.Jitter = 2
	s, err := session.New(scripted.New(scripted.Script{}), session.WithConfig(cfg))
	assert.Nil(t, s)
	assert.ErrorContains(t, err, "retry.jitter")
	_, err = session.New(nil)
	assert.ErrorContains(t, err, "nil Agent")
	_, err = session.New(scripted.New(scripted.Script{}), session.WithSessionID(""))
	assert.ErrorContains(t, err, "empty session ID")
}
