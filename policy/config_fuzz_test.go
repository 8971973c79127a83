package policy_test

import (
	"bytes"
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
		gt := g.Type
		if gt.Kind() == reflect.Pointer {
			gt = gt.Elem()
		}
		for f := range gt.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			keys = append(keys, group+"."+name)
		}
	}
	// fallback.models's own keys (issue 25).
	for f := range reflect.TypeFor[policy.FallbackModel]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		keys = append(keys, "fallback.models."+name)
	}
	return keys
}

// FuzzParseConfig feeds arbitrary bytes to ParseConfig: it never panics,
// and either returns settings, from an object free of nulls and repeated
// keys, that pass Validate and come back the same through json.Marshal and
// ParseConfig, or an ErrInvalidConfig that names a key or the settings as a
// whole. Run it longer with:
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
		`{"retry":null,"retry":{}}`, `{"retry":{"maxRetries":null,"maxRetries":5}}`,
		`{"retry":{"rules":"seed","rul\u0065s":"extended"}}`, `{"retry":{},"compaction":{},"retry":{}}`,
		`{"fallback":{"models":["b",{"id":"c","contextWindow":1000}],"after":"overloaded","cooldownMs":1}}`,
		`{"fallback":{"models":[]}}`, `{"fallback":{"models":["b","b"]}}`, `{"fallback":{"models":[{"id":"b","x":1}]}}`,
		`{"fallback":{"models":[null]}}`, `{"fallback":{"models":[3]}}`, `{"fallback":{"after":"never","models":["b"]}}`,
		`{"fallback":null}`, `{"fallback":{"models":[{"id":null}]}}`, `{"fallback":{"models":[{"contextWindow":-1,"id":"b"}]}}`,
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
			if !reflect.DeepEqual(cfg, policy.Config{}) {
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
		if json.Unmarshal(data, &tree) != nil || nullOrRepeat(data) {
			t.Fatalf("%q: accepted, though not an object free of nulls and repeated keys", data)
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
		if !reflect.DeepEqual(back, cfg) {
			t.Fatalf("%q: %+v came back as %+v through %s", data, cfg, back, out)
		}
	})
}

// nullOrRepeat reports whether the valid JSON data holds a null, or an
// object with a key twice, anywhere. It reads tokens, not a decoded tree,
// where a repeated key would keep only its last value.
func nullOrRepeat(data []byte) bool {
	type object struct {
		keys    map[string]bool
		wantKey bool // the next token is a key or the closing '}'
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var open []*object // the open objects and arrays (nil), innermost last
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if n := len(open); n > 0 && open[n-1] != nil && open[n-1].wantKey {
			if key, ok := tok.(string); ok {
				if open[n-1].keys[key] {
					return true
				}
				open[n-1].keys[key] = true
				open[n-1].wantKey = false
				continue
			}
		}
		switch tok {
		case nil:
			return true
		case json.Delim('{'):
			open = append(open, &object{keys: map[string]bool{}, wantKey: true})
			continue
		case json.Delim('['):
			open = append(open, nil)
			continue
		case json.Delim('}'), json.Delim(']'):
			open = open[:len(open)-1]
		}
		// A value ended: an object around it wants its next key.
		if n := len(open); n > 0 && open[n-1] != nil {
			open[n-1].wantKey = true
		}
	}
}
