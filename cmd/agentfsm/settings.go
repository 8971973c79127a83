package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/policy"
)

// settings is what a settings file holds: the session's config, and the
// credentials a usage limit switches between.
type settings struct {
	config policy.Config
	// credentials name their secrets (an environment variable each),
	// never hold them.
	credentials []settingsCredential
}

// settingsCredential is one entry of the settings' "credentials" list:
// {"id":"work","type":"api_key","env":"WORK_ANTHROPIC_KEY"}, with an
// optional "baseUrl".
type settingsCredential struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Env     string `json:"env"`
	BaseURL string `json:"baseUrl"`
}

// envName is a portable environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// referenceSettings is the --settings value that names the reference
// agent's policy instead of a file (./reference names a file of that name).
const referenceSettings = "reference"

// patientSettings is the --settings value that names the preset for
// unattended runs (policy.PatientConfig) instead of a file (./patient names
// a file of that name).
const patientSettings = "patient"

// maxSettingsSize is the largest settings file loadSettings reads.
const maxSettingsSize = 1 << 20

// loadSettings reads the settings file at path: the default config and no
// credentials when path is empty, the reference's policy when it is
// "reference", the preset for unattended runs when it is "patient". The error names the flag, the file and what was wrong. A
// file may be anything that can be read (a pipe too), up to
// maxSettingsSize bytes.
func loadSettings(path string) (settings, error) {
	switch path {
	case "":
		return settings{config: policy.DefaultConfig()}, nil
	case referenceSettings:
		return settings{config: policy.ReferenceConfig()}, nil
	case patientSettings:
		return settings{config: policy.PatientConfig()}, nil
	}
	data, err := readSettingsFile(path)
	if err != nil {
		return settings{}, fmt.Errorf("--settings: %w", err)
	}
	s, err := parseSettings(data)
	if err != nil {
		return settings{}, fmt.Errorf("--settings %s: %w", path, err)
	}
	return s, nil
}

// readSettingsFile reads path, refusing more than maxSettingsSize bytes,
// and, on Unix, a file another user could have written
// (checkSettingsOwner): both before reading it.
func readSettingsFile(path string) ([]byte, error) {
	return readBounded(path, maxSettingsSize, "settings file", checkSettingsOwner)
}

// readBounded reads the file at path (a pipe or a device too), refusing
// one of more than limit bytes after reading no more than limit+1: the
// error names the path, the limit and what the file was to be (kind).
// Each check is given the opened file's FileInfo before it is read; the
// first error is returned.
func readBounded(path string, limit int64, kind string, checks ...func(string, os.FileInfo) error) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if len(checks) > 0 {
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		for _, check := range checks {
			if err := check(path, fi); err != nil {
				return nil, err
			}
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes, which no %s is", path, limit, kind)
	}
	return data, nil
}

// parseSettings reads a settings object: the session's config
// (policy.ParseConfig) and an optional "credentials" list. No key may
// occur twice in an object, at any depth: the error names the first one
// repeated by its path ("retry.maxRetries", "credentials[1].env").
func parseSettings(data []byte) (settings, error) {
	if !json.Valid(data) {
		// Not JSON: ParseConfig says where.
		_, err := policy.ParseConfig(data)
		return settings{}, err
	}
	if err := checkRepeatedKeys(data); err != nil {
		return settings{}, err
	}
	rest, creds, found := cutMember(data, "credentials")
	var list []settingsCredential
	if found {
		var err error
		if list, err = parseCredentials(creds); err != nil {
			return settings{}, err
		}
	}
	cfg, err := policy.ParseConfig(rest)
	if err != nil {
		return settings{}, err
	}
	return settings{config: cfg, credentials: list}, nil
}

// cutMember returns the valid JSON data without its top-level member key,
// and that member's value; found is false, and rest is data, when data is
// not an object or has no such member. The other members keep their bytes
// and their order.
func cutMember(data []byte, key string) (rest, value []byte, found bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return data, nil, false
	}
	var out bytes.Buffer
	out.WriteByte('{')
	for dec.More() {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return data, nil, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return data, nil, false
		}
		if tok == key && !found {
			value, found = raw, true
			continue
		}
		member := bytes.TrimLeft(data[start:dec.InputOffset()], " \t\r\n,")
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		out.Write(member)
	}
	if !found {
		return data, nil, false
	}
	out.WriteByte('}')
	return out.Bytes(), value, true
}

// checkRepeatedKeys reports the first key that occurs twice in one object
// of the valid JSON data, at any depth, by its path: "retry.maxRetries",
// "credentials[1].env", or the key alone at the top.
func checkRepeatedKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	return walkRepeats(dec, tok, "")
}

// walkRepeats reads the rest of the value that starts with tok, at path.
func walkRepeats(dec *json.Decoder, tok json.Token, path string) error {
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string)
			name := key
			if path != "" {
				name = path + "." + key
			}
			if seen[key] {
				return fmt.Errorf("%w: %s appears twice", policy.ErrInvalidConfig, name)
			}
			seen[key] = true
			if tok, err = dec.Token(); err != nil {
				return err
			}
			if err := walkRepeats(dec, tok, name); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			if err := walkRepeats(dec, tok, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	_, err := dec.Token() // the closing '}' or ']'
	return err
}

// parseCredentials reads the "credentials" list.
func parseCredentials(raw json.RawMessage) ([]settingsCredential, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var list []settingsCredential
	if err := dec.Decode(&list); err != nil {
		return nil, fmt.Errorf(`"credentials" must be a list of {"id","type","env","baseUrl"}: %w`, err)
	}
	if len(list) == 0 {
		return nil, errors.New(`"credentials" is empty: list at least one, or leave it out`)
	}
	seen := map[string]bool{}
	for i, c := range list {
		switch {
		case c.ID == "":
			return nil, fmt.Errorf(`credentials[%d]: "id" is required`, i)
		case seen[c.ID]:
			return nil, fmt.Errorf(`credentials[%d]: the id %q is used twice`, i, c.ID)
		case !envName.MatchString(c.Env):
			return nil, fmt.Errorf(`credentials[%d] (%s): "env" must name the environment variable that holds its secret, got %q`, i, c.ID, c.Env)
		}
		seen[c.ID] = true
		if list[i].Type == "" {
			list[i].Type = "api_key"
		}
	}
	return list, nil
}

// store returns the credential store of the settings' credentials for
// provider, nil when there are none. Each credential's secret is its
// environment variable, read when a call is made (credentials.EnvSecrets); a
// variable not set now is an error that names it, so a missing key is a
// usage error before any turn.
func (s settings) store(provider string, lookup func(string) (string, bool)) (credentials.CredentialStore, error) {
	if len(s.credentials) == 0 {
		return nil, nil
	}
	var creds []policy.Credential
	for _, c := range s.credentials {
		if v, ok := lookup(c.Env); !ok || v == "" {
			return nil, fmt.Errorf("credential %q: the environment variable %s is not set", c.ID, c.Env)
		}
		creds = append(creds, policy.Credential{ID: c.ID, Provider: provider, Type: c.Type, BaseURL: c.BaseURL, Secret: "env:" + c.Env})
	}
	store, err := credentials.NewMemoryCredentials(nil, creds...)
	if err != nil {
		return nil, err
	}
	return store, nil
}

// settingsHelp is the --settings flag's help.
const settingsHelp = "a settings `file`: {\"retry\":{…},\"compaction\":{…},\"credentials\":[{\"id\":\"a\",\"type\":\"api_key\",\"env\":\"KEY_A\"},…]} over the defaults,\n" +
	"or reference: exactly the policy of the pi coding agent's AgentSession, which agentfsm ports (its seed classifier rules,\n" +
	"hints not honoured, no cap on a delay); or patient: for unattended runs, retries without a count limit\n" +
	"within 30 minutes of a chain's first failure, delays capped at 60 s; the credentials, when listed, are the keys a usage limit\n" +
	"switches between, each read from its environment variable at each call"
