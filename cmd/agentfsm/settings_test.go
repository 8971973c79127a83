package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/policy"
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
	key, err := credentials.EnvSecrets{Lookup: lookup}.Resolve(context.Background(), c)
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

// Issue "Reliability and security, round two", item 7: a key given twice in
// one object is refused at every depth, with credentials or without (a file
// that listed credentials used to re-encode its top level through a map,
// which kept the last "retry" of two); the error names the key by its path.
func TestParseSettingsRefusesRepeatedKeys(t *testing.T) {
	const cred = `"credentials":[{"id":"a","env":"K"}]`
	for _, c := range []struct{ in, want string }{
		{`{"retry":{"maxRetries":1},"retry":{}}`, "retry appears twice"},
		{`{` + cred + `,"retry":{"maxRetries":1},"retry":{}}`, "retry appears twice"},
		{`{"retry":{"maxRetries":1},` + cred + `,"retry":{"maxRetries":1}}`, "retry appears twice"},
		{`{"retry":{"maxRetries":1,"maxRetries":2}}`, "retry.maxRetries appears twice"},
		{`{` + cred + `,"retry":{"maxRetries":1,"maxRetries":2}}`, "retry.maxRetries appears twice"},
		{`{` + cred + `,"compaction":{},"compaction":{"enabled":false}}`, "compaction appears twice"},
		{`{` + cred + `,` + cred + `}`, "credentials appears twice"},
		{`{"credentials":[{"id":"a","env":"K"},{"id":"b","env":"L","env":"M"}]}`, "credentials[1].env appears twice"},
		{`{"credentials":[{"id":"a","id":"b","env":"K"}]}`, "credentials[0].id appears twice"},
		{`{"credentials":[{"id":"a","env":"K","baseUrl":"http://x/","baseUrl":"http://evil/"}]}`, "credentials[0].baseUrl appears twice"},
		{`{"cred\u0065ntials":[{"id":"a","env":"K"}],` + cred + `}`, "credentials appears twice"},
		{`{` + cred + `,"retry":{"rules":"seed","rul\u0065s":"extended"}}`, "retry.rules appears twice"},
	} {
		_, err := parseSettings([]byte(c.in))
		require.Error(t, err, c.in)
		assert.ErrorIs(t, err, policy.ErrInvalidConfig, c.in)
		assert.Contains(t, err.Error(), c.want, c.in)
	}
}

// FuzzParseSettings: the credentials change nothing of how the rest is
// read. Settings with a "credentials" member give the config, or an error,
// exactly where the same settings without it do; no input panics, and no
// accepted input has a key twice in an object. Run it longer with:
// go test ./cmd/agentfsm -run '^$' -fuzz FuzzParseSettings -fuzztime 3m
func FuzzParseSettings(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"retry":{"maxRetries":5,"rules":"extended"},"compaction":{"enabled":false}}`,
		`{"retry":{"maxRetries":1},"retry":{}}`, `{"retry":{},"compaction":{},"retry":{}}`,
		`{"retry":{"maxRetries":null}}`, `{"retry":{"maxRetries":1.5}}`, `{"nonsense":1}`, `[]`, `null`,
		`{"retry":{"rules":"seed","rul\u0065s":"extended"}}`, `{"retry" : { "maxRetries" : 2 } , "compaction":{}}`,
	} {
		f.Add([]byte(s))
	}
	const cred = `"credentials":[{"id":"a","env":"K"}]`
	f.Fuzz(func(t *testing.T, data []byte) {
		plain, plainErr := parseSettings(data)
		if plainErr == nil && hasRepeatedKey(data) {
			t.Fatalf("%q: accepted with a key twice", data)
		}
		trimmed := bytes.TrimSpace(data)
		if !json.Valid(data) || len(trimmed) < 2 || trimmed[0] != '{' || bytes.Contains(data, []byte("credentials")) || bytes.Contains(data, []byte(`\u`)) {
			return
		}
		body := bytes.TrimSpace(trimmed[1 : len(trimmed)-1])
		for _, with := range [][]byte{
			append([]byte("{"+cred), append(commaIf(body), append(body, '}')...)...),
			append(append([]byte("{"), body...), append(commaIf(body), []byte(cred+"}")...)...),
		} {
			got, err := parseSettings(with)
			if (err == nil) != (plainErr == nil) {
				t.Fatalf("%q: error %v without credentials, %v with (%s)", data, plainErr, err, with)
			}
			if err == nil && got.config != plain.config {
				t.Fatalf("%q: config %+v without credentials, %+v with (%s)", data, plain.config, got.config, with)
			}
		}
	})
}

// commaIf is the comma that joins body to the credentials member, none
// when body is empty.
func commaIf(body []byte) []byte {
	if len(body) == 0 {
		return nil
	}
	return []byte(",")
}

// hasRepeatedKey reports whether the valid JSON data has an object with a
// key twice, at any depth. It counts each object's members in the token
// stream against the keys its map has.
func hasRepeatedKey(data []byte) bool {
	var tree any
	if json.Unmarshal(data, &tree) != nil {
		return false
	}
	var raw json.RawMessage = data
	return repeated(raw)
}

func repeated(raw json.RawMessage) bool {
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) == nil && members != nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		_, _ = dec.Token() // '{'
		n := 0
		for dec.More() {
			_, _ = dec.Token() // the key
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return false
			}
			n++
		}
		if n != len(members) {
			return true
		}
		for _, v := range members {
			if repeated(v) {
				return true
			}
		}
		return false
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) == nil {
		for _, v := range items {
			if repeated(v) {
				return true
			}
		}
	}
	return false
}

// A settings file is read up to maxSettingsSize: a bigger one is refused
// with its size, whatever it holds (here valid JSON after 2 MiB of spaces),
// and so is an endless one; a directory or a missing file is a one-line
// error that names it.
func TestLoadSettingsHostilePaths(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	require.NoError(t, os.WriteFile(big, append(bytes.Repeat([]byte(" "), 2<<20), "{}"...), 0o644))
	_, err := loadSettings(big)
	require.Error(t, err)
	assert.Equal(t, "--settings: "+big+": larger than 1048576 bytes, which no settings file is", err.Error())

	exact := filepath.Join(dir, "exact.json")
	require.NoError(t, os.WriteFile(exact, append(bytes.Repeat([]byte(" "), maxSettingsSize-2), "{}"...), 0o644))
	s, err := loadSettings(exact)
	require.NoError(t, err, "a file of exactly the limit is read")
	assert.Equal(t, policy.DefaultConfig(), s.config)

	_, err = loadSettings(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--settings: ")
	assert.Contains(t, err.Error(), dir)
	assert.Contains(t, err.Error(), "is a directory")
	assert.NotContains(t, err.Error(), "\n")

	missing := filepath.Join(dir, "missing.json")
	_, err = loadSettings(missing)
	require.Error(t, err)
	assert.Equal(t, "--settings: open "+missing+": no such file or directory", err.Error())

	for _, garbage := range []string{"\x00\x01\x02", "\xff\xfe{}", `{"retry":` + strings.Repeat("[", 100000)} {
		p := filepath.Join(dir, "garbage.json")
		require.NoError(t, os.WriteFile(p, []byte(garbage), 0o644))
		_, err = loadSettings(p)
		require.Error(t, err)
		assert.ErrorIs(t, err, policy.ErrInvalidConfig, "%q", garbage)
		assert.NotContains(t, err.Error(), "\n")
	}
}
