package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/session"
)

// Issue item 5: the settings' credentials name each key's variable; bad
// entries are refused with an error that says which and why.
func TestParseSettingsCredentials(t *testing.T) {
	s, err := parseSettings([]byte(`{"retry":{"baseDelayMs":5},"credentials":[{"id":"a","type":"oauth","env":"KEY_A","baseUrl":"http://x/"},{"id":"b","env":"KEY_B"}]}`))
	require.NoError(t, err)
	assert.Equal(t, int64(5), s.config.Retry.BaseDelayMs)
	assert.Equal(t, []settingsCredential{{ID: "a", Type: "oauth", Env: "KEY_A", BaseURL: "http://x/"}, {ID: "b", Type: "api_key", Env: "KEY_B"}}, s.credentials)

	env := map[string]string{"KEY_A": "sk-a", "KEY_B": "sk-b"}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	store, err := s.store("openai", lookup)
	require.NoError(t, err)
	c, ok := store.Current("openai", "s1")
	require.True(t, ok)
	assert.Contains(t, []string{"env:KEY_A", "env:KEY_B"}, c.Secret, "the credential names its variable, never holds the key")
	key, err := session.EnvSecrets{Lookup: lookup}.Resolve(context.Background(), c)
	require.NoError(t, err)
	assert.Equal(t, env[c.Secret[len("env:"):]], key)

	s, err = parseSettings([]byte(`{"retry":{"baseDelayMs":5}}`))
	require.NoError(t, err)
	store, err = s.store("openai", lookup)
	require.NoError(t, err)
	assert.Nil(t, store, "no credentials, no store")

	for _, c := range []struct{ in, want string }{
		{`{"credentials":[]}`, `"credentials" is empty`},
		{`{"credentials":{}}`, `"credentials" must be a list`},
		{`{"credentials":[{"id":"a","env":"K","secret":"sk-inline"}]}`, `unknown field "secret"`},
		{`{"credentials":[{"env":"K"}]}`, `credentials[0]: "id" is required`},
		{`{"credentials":[{"id":"a","env":"K"},{"id":"a","env":"L"}]}`, `credentials[1]: the id "a" is used twice`},
		{`{"credentials":[{"id":"a","env":"env:K"}]}`, `credentials[0] (a): "env" must name the environment variable that holds its secret, got "env:K"`},
		{`{"credentials":[{"id":"a"}]}`, `"env" must name`},
		{`{"credentials":[{"id":"a","env":"K"}],"retry":{"maxRetries":-1}}`, "retry.maxRetries"},
		{`{"credentials":[{"id":"a","env":"K"}],"nonsense":1}`, "nonsense"},
	} {
		_, err := parseSettings([]byte(c.in))
		require.Error(t, err, c.in)
		assert.Contains(t, err.Error(), c.want, c.in)
	}
}
