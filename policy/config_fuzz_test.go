package policy_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentfsm/agentfsm/policy"
)

// settingsKeys are every key a settings error may name, dotted.
func settingsKeys() []string {
	var keys []string
	top := reflect.TypeFor[policy.Config]()
	for g := range top.Fields() {
		group, _, _ := strings.Cut(g.Tag.Get("json"), ",")
		keys = append(keys, group)
		for f := range g.Type.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			keys = append(keys, group+"."+name)
		}
	}
	return keys
}

// FuzzParseConfig feeds arbitrary bytes to ParseConfig: it never panics,
// and either returns settings that pass Validate and come back the same
// through json.Marshal and ParseConfig, or an ErrInvalidConfig that names a
// key or the settings as a whole. Run it longer with:
// go test ./session -run '^$' -fuzz FuzzParseConfig -fuzztime 3m
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"retry":{"maxRetries":5,"rules":"extended"},"compaction":{"enabled":false}}`,
		`{"retry":{"enabled":true,"maxRetries":3,"baseDelayMs":2000,"maxDelayMs":0,"jitter":0.25,"honorRetryAfter":true,"rules":"seed"},` +
			`"compaction":{"enabled":true,"reserveTokens":16384,"keepRecentTokens":20000}}`,
		`null`, `[]`, `3`, `"x"`, `true`, ``, `{"retry":null}`, `{"retry":{"enabled":null}}`,
		`{"retry":{"maxRetries":null}}`, `{"retry":{"maxRetries":1.5}}`, `{"retry":{"jitter":1e400}}`,
		`{"retry":{"jitter":-0}}`, `{"retry":{"rules":"strict"}}`, `{"retry":{"maxRetry":3}}`, `{"Retry":{}}`,
		`{"retry":{}} {}`, `{"retry":`, `{"retry":{"baseDelayMs":9223372036854775807}}`, "\xef\xbb\xbf{}",
		`{"retry":{"maxRetries":1,"maxRetries":null}}`, `{"compaction":{"reserveTokens":-1}}`,
	} {
		f.Add([]byte(s))
	}
	keys := settingsKeys()
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := policy.ParseConfig(data)
		if err != nil {
			if !errors.Is(err, policy.ErrInvalidConfig) {
				t.Fatalf("%q: error %v does not match ErrInvalidConfig", data, err)
			}
			if cfg != (policy.Config{}) {
				t.Fatalf("%q: error %v with settings %+v", data, err, cfg)
			}
			msg := err.Error()
			named := strings.Contains(msg, "the settings") || strings.Contains(msg, "unknown key \"")
			for _, k := range keys {
				named = named || strings.Contains(msg, ": "+k+" ")
			}
			if !named {
				t.Fatalf("%q: error %q names no key and not the settings", data, msg)
			}
			return
		}
		var tree any
		if json.Unmarshal(data, &tree) != nil || hasNull(tree) {
			t.Fatalf("%q: accepted, though not an object free of nulls", data)
		}
		if _, ok := tree.(map[string]any); !ok {
			t.Fatalf("%q: accepted, though not an object", data)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%q: accepted settings fail Validate: %v", data, err)
		}
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("%q: accepted settings %+v do not marshal: %v", data, cfg, err)
		}
		back, err := policy.ParseConfig(out)
		if err != nil {
			t.Fatalf("%q: accepted settings marshal to %s, which ParseConfig refuses: %v", data, out, err)
		}
		if back != cfg {
			t.Fatalf("%q: %+v came back as %+v through %s", data, cfg, back, out)
		}
	})
}

// hasNull reports whether a decoded JSON value holds a null anywhere.
func hasNull(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, e := range v {
			if hasNull(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasNull(e) {
				return true
			}
		}
	}
	return false
}
