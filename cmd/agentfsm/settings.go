package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"

	"github.com/agentfsm/agentfsm/session"
)

// settings is what a settings file holds: the session's config, and the
// credentials a usage limit switches between.
type settings struct {
	config session.Config
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

// loadSettings reads the settings file at path: the default config and no
// credentials when path is empty, the reference's policy when it is
// "reference". The error names the flag, the file and what was wrong.
func loadSettings(path string) (settings, error) {
	switch path {
	case "":
		return settings{config: session.DefaultConfig()}, nil
	case referenceSettings:
		return settings{config: session.ReferenceConfig()}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return settings{}, fmt.Errorf("--settings: %w", err)
	}
	s, err := parseSettings(data)
	if err != nil {
		return settings{}, fmt.Errorf("--settings %s: %w", path, err)
	}
	return s, nil
}

// parseSettings reads a settings object: the session's config
// (session.ParseConfig) and an optional "credentials" list.
func parseSettings(data []byte) (settings, error) {
	var top map[string]json.RawMessage
	if json.Valid(data) && json.Unmarshal(data, &top) == nil {
		if raw, ok := top["credentials"]; ok {
			delete(top, "credentials")
			creds, err := parseCredentials(raw)
			if err != nil {
				return settings{}, err
			}
			rest, err := json.Marshal(top)
			if err != nil {
				return settings{}, err
			}
			cfg, err := session.ParseConfig(rest)
			if err != nil {
				return settings{}, err
			}
			return settings{config: cfg, credentials: creds}, nil
		}
	}
	cfg, err := session.ParseConfig(data)
	if err != nil {
		return settings{}, err
	}
	return settings{config: cfg}, nil
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
// environment variable, read when a call is made (session.EnvSecrets); a
// variable not set now is an error that names it, so a missing key is a
// usage error before any turn.
func (s settings) store(provider string, lookup func(string) (string, bool)) (session.CredentialStore, error) {
	if len(s.credentials) == 0 {
		return nil, nil
	}
	var creds []session.Credential
	for _, c := range s.credentials {
		if v, ok := lookup(c.Env); !ok || v == "" {
			return nil, fmt.Errorf("credential %q: the environment variable %s is not set", c.ID, c.Env)
		}
		creds = append(creds, session.Credential{ID: c.ID, Provider: provider, Type: c.Type, BaseURL: c.BaseURL, Secret: "env:" + c.Env})
	}
	return session.NewMemoryCredentials(nil, creds...), nil
}

// settingsHelp is the --settings flag's help.
const settingsHelp = "a settings `file`: {\"retry\":{…},\"compaction\":{…},\"credentials\":[{\"id\":\"a\",\"type\":\"api_key\",\"env\":\"KEY_A\"},…]} over the defaults,\n" +
	"or reference: the reference agent's policy exactly; the credentials, when listed, are the keys a usage limit\n" +
	"switches between, each read from its environment variable at each call"
