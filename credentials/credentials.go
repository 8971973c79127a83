package credentials

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentfsm/agentfsm/internal/httpsafe"
	"github.com/agentfsm/agentfsm/policy"
)

// SecretResolver turns a credential into its secret (an API key or a
// token) when an agent is about to call the provider with it.
type SecretResolver interface {
	Resolve(ctx context.Context, c policy.Credential) (string, error)
}

// EnvSecrets is the SecretResolver that reads the environment: a
// credential's Secret "env:NAME" is the variable NAME; a credential with no
// Secret is the provider's usual variable (ANTHROPIC_API_KEY for
// "anthropic", OPENAI_API_KEY for "openai"). Lookup replaces os.LookupEnv
// when set.
type EnvSecrets struct {
	Lookup func(name string) (string, bool)
}

// providerKeys are the variables EnvSecrets reads for a credential that
// names no secret.
var providerKeys = map[string]string{"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}

// ErrNoSecret matches the error of a secret that cannot be resolved.
var ErrNoSecret = errors.New("credentials: no secret for the credential")

// Resolve implements SecretResolver.
func (r EnvSecrets) Resolve(_ context.Context, c policy.Credential) (string, error) {
	lookup := r.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	name, ok := strings.CutPrefix(c.Secret, "env:")
	switch {
	case c.Secret == "":
		if name, ok = providerKeys[c.Provider]; !ok {
			return "", fmt.Errorf("%w %q: it names no secret, and provider %q has no usual variable", ErrNoSecret, c.ID, c.Provider)
		}
	case !ok || name == "":
		return "", fmt.Errorf("%w %q: secret %q is not of the form env:NAME", ErrNoSecret, c.ID, c.Secret)
	}
	v, found := lookup(name)
	if !found || v == "" {
		return "", fmt.Errorf("%w %q: the environment variable %s is not set", ErrNoSecret, c.ID, name)
	}
	return v, nil
}

// CredentialStore chooses the credential a session calls its provider with
// and takes note of usage limits (docs/policy.md §3.3). Implementations must be
// safe for concurrent use by many sessions.
type CredentialStore interface {
	// Current returns the credential the session should use for provider,
	// and false when the store has none. It never hands a session a
	// credential of another type than the one it started with.
	Current(provider, sessionID string) (policy.Credential, bool)
	// MarkUsageLimitReached blocks the credential the session last used
	// for provider (at baseURL) until hint from now (60 s when hint is 0),
	// and reports whether another credential of the same provider and type
	// is free: then the session retries without waiting, and the next
	// Current hands out a free credential of that type. Current and
	// MarkUsageLimitReached must follow one rule, so that a reported
	// switch is what the session gets.
	MarkUsageLimitReached(provider, sessionID string, hint time.Duration, baseURL string) (switched bool)
}

// DefaultUsageLimitBlock is how long a credential stays blocked when the
// server gave no retry hint.
const DefaultUsageLimitBlock = 60 * time.Second

// MemoryCredentials is the in-memory CredentialStore: per provider an
// ordered list of credentials. It is safe for concurrent use. The zero
// value is an empty store on the wall clock: it hands out nothing.
//
// One rule decides which credential a session gets, in Current and after
// MarkUsageLimitReached alike. A session's start credential for a provider
// is the one at FNV-1a(sessionID) mod n in the provider's list, and its
// type is the session's type: the session only ever gets credentials of
// that type. It gets the first free one walking forward from its start
// credential, and when all of its type are blocked, the first of its type
// in order. MarkUsageLimitReached blocks the credential the session last
// got and reports a switch exactly when the rule then gives a free one, so
// a switch goes to another free credential of the same provider and type,
// never to another type.
//
// "The type the session started with" is thus a function of the session ID
// and the list alone: it does not depend on what other sessions sharing the
// store have blocked, on the order in which sessions start, or on the
// process (a session reopened elsewhere, on a store built from the same
// list, keeps its type). Sessions are told apart by ID only: two sessions
// with one ID share their place in the store. A blocked credential is free
// again when its time passes.
//
// Credentials with a BaseURL serve only that endpoint (the same URL, or
// the same with its password masked, as the provider adapters' models
// give it). Current is not told
// the endpoint, so it chooses among all of the session's type, while
// MarkUsageLimitReached blocks and switches among those serving its
// baseURL.
type MemoryCredentials struct {
	now func() time.Time

	mu        sync.Mutex
	providers map[string][]*memCredential
	lastUsed  map[usageKey]int
}

type memCredential struct {
	policy.Credential
	blockedUntil time.Time
}

type usageKey struct{ provider, sessionID string }

// credKey is how a credential is known: its provider and ID.
type credKey struct{ provider, id string }

// NewMemoryCredentials returns a store holding creds, in order within each
// provider. now is the clock it blocks credentials by; nil means time.Now.
//
// A credential is known by its provider and ID (BlockedUntil, the events
// that name it), so every credential must have an ID, and no two of one
// provider may share one: the error names the first that does not hold,
// by its index in creds, and no store is returned. The same ID under two
// providers is two credentials.
func NewMemoryCredentials(now func() time.Time, creds ...policy.Credential) (*MemoryCredentials, error) {
	if now == nil {
		now = time.Now
	}
	m := &MemoryCredentials{now: now, providers: map[string][]*memCredential{}, lastUsed: map[usageKey]int{}}
	seen := map[credKey]int{} // index in creds
	for i, c := range creds {
		if c.ID == "" {
			return nil, fmt.Errorf("credentials: credential %d (provider %q) has no ID", i, c.Provider)
		}
		key := credKey{c.Provider, c.ID}
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("credentials: credential %d: provider %q already has a credential %q (credential %d)", i, c.Provider, c.ID, j)
		}
		seen[key] = i
		m.providers[c.Provider] = append(m.providers[c.Provider], &memCredential{Credential: c})
	}
	return m, nil
}

// Current implements CredentialStore.
func (m *MemoryCredentials) Current(provider, sessionID string) (policy.Credential, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.providers[provider]
	i, _, ok := choose(list, sessionID, "", m.clock())
	if !ok {
		return policy.Credential{}, false
	}
	m.lastUsed[usageKey{provider, sessionID}] = i
	return list[i].Credential, true
}

// MarkUsageLimitReached implements CredentialStore.
func (m *MemoryCredentials) MarkUsageLimitReached(provider, sessionID string, hint time.Duration, baseURL string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.providers[provider]
	now := m.clock()
	key := usageKey{provider, sessionID}
	last, ok := m.lastUsed[key]
	if !ok || !list[last].serves(baseURL) {
		if last, _, ok = choose(list, sessionID, baseURL, now); !ok {
			return false
		}
	}
	if hint <= 0 {
		hint = DefaultUsageLimitBlock
	}
	list[last].blockedUntil = now.Add(hint)
	next, free, _ := choose(list, sessionID, baseURL, now)
	if !free {
		return false
	}
	m.lastUsed[key] = next
	return true
}

// BlockedUntil returns when the credential id of provider is free again:
// the zero time when it is not blocked (or not known).
func (m *MemoryCredentials) BlockedUntil(provider, id string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.providers[provider] {
		if c.ID == id && c.blocked(m.clock()) {
			return c.blockedUntil
		}
	}
	return time.Time{}
}

// clock is the store's time: its clock, or the wall clock for the zero
// value.
func (m *MemoryCredentials) clock() time.Time {
	if m.now == nil {
		return time.Now()
	}
	return m.now()
}

// choose is the rule of MemoryCredentials: the index of the credential
// sessionID gets from list when calling baseURL ("" for any). The
// candidates are the credentials of the session's type (its start
// credential's, at FNV-1a(sessionID) mod n) that serve baseURL: the first
// free one walking forward from the start, else the first in order. free
// reports whether the one chosen is free; ok is false when there is no
// candidate.
func choose(list []*memCredential, sessionID, baseURL string, now time.Time) (i int, free, ok bool) {
	n := len(list)
	if n == 0 {
		return 0, false, false
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(sessionID))
	start := int(h.Sum32() % uint32(n))
	typ := list[start].Type
	candidate := func(c *memCredential) bool { return c.Type == typ && c.serves(baseURL) }
	for k := range n {
		i := (start + k) % n
		if candidate(list[i]) && !list[i].blocked(now) {
			return i, true, true
		}
	}
	for i, c := range list {
		if candidate(c) {
			return i, false, true
		}
	}
	return 0, false, false
}

func (c *memCredential) blocked(now time.Time) bool { return now.Before(c.blockedUntil) }

func (c *memCredential) serves(baseURL string) bool {
	// The adapters' models give their base URL with any password masked.
	return baseURL == "" || c.BaseURL == "" || c.BaseURL == baseURL || httpsafe.RedactURL(c.BaseURL) == baseURL
}
