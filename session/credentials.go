package session

import (
	"hash/fnv"
	"sync"
	"time"
)

// Credential is one way to authenticate with a provider.
type Credential struct {
	// ID names the credential.
	ID string `json:"id"`
	// Provider is the provider it authenticates with.
	Provider string `json:"provider"`
	// Type is its kind (such as "api_key" or "oauth"); a usage limit only
	// switches to a credential of the same type.
	Type string `json:"type"`
	// BaseURL, when set, is the endpoint the credential belongs to; empty
	// means any endpoint of the provider.
	BaseURL string `json:"baseUrl,omitempty"`
}

// CredentialStore chooses the credential a session calls its provider with
// and takes note of usage limits (policy §3.3). Implementations must be
// safe for concurrent use by many sessions.
type CredentialStore interface {
	// Current returns the credential the session should use for provider,
	// and false when the store has none.
	Current(provider, sessionID string) (Credential, bool)
	// MarkUsageLimitReached blocks the credential the session last used
	// for provider (at baseURL) until hint from now (60 s when hint is 0),
	// and reports whether another credential of the same provider and type
	// is free, which the session then switches to without waiting.
	MarkUsageLimitReached(provider, sessionID string, hint time.Duration, baseURL string) (switched bool)
}

// DefaultUsageLimitBlock is how long a credential stays blocked when the
// server gave no retry hint.
const DefaultUsageLimitBlock = 60 * time.Second

// MemoryCredentials is the in-memory CredentialStore: per provider an
// ordered list of credentials. A session starts at the credential
// FNV-1a(sessionID) mod n and walks forward past blocked ones; a blocked
// credential is free again when its time passes; when all are blocked, the
// first in order is used. It is safe for concurrent use.
type MemoryCredentials struct {
	now func() time.Time

	mu        sync.Mutex
	providers map[string][]*memCredential
	lastUsed  map[usageKey]int
}

type memCredential struct {
	Credential
	blockedUntil time.Time
}

type usageKey struct{ provider, sessionID string }

// NewMemoryCredentials returns a store holding creds, in order within each
// provider. now is the clock it blocks credentials by; nil means time.Now.
func NewMemoryCredentials(now func() time.Time, creds ...Credential) *MemoryCredentials {
	if now == nil {
		now = time.Now
	}
	m := &MemoryCredentials{now: now, providers: map[string][]*memCredential{}, lastUsed: map[usageKey]int{}}
	for _, c := range creds {
		m.providers[c.Provider] = append(m.providers[c.Provider], &memCredential{Credential: c})
	}
	return m
}

// Current implements CredentialStore.
func (m *MemoryCredentials) Current(provider, sessionID string) (Credential, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.pick(provider, sessionID, "", m.now())
	if !ok {
		return Credential{}, false
	}
	m.lastUsed[usageKey{provider, sessionID}] = i
	return m.providers[provider][i].Credential, true
}

// MarkUsageLimitReached implements CredentialStore.
func (m *MemoryCredentials) MarkUsageLimitReached(provider, sessionID string, hint time.Duration, baseURL string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.providers[provider]
	if len(list) == 0 {
		return false
	}
	now := m.now()
	key := usageKey{provider, sessionID}
	last, ok := m.lastUsed[key]
	if !ok || !list[last].serves(baseURL) {
		if last, ok = m.pick(provider, sessionID, baseURL, now); !ok {
			return false
		}
	}
	if hint <= 0 {
		hint = DefaultUsageLimitBlock
	}
	blocked := list[last]
	blocked.blockedUntil = now.Add(hint)
	next, ok := m.pick(provider, sessionID, baseURL, now)
	if !ok || next == last || list[next].Type != blocked.Type || list[next].blocked(now) {
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
		if c.ID == id && c.blocked(m.now()) {
			return c.blockedUntil
		}
	}
	return time.Time{}
}

// pick returns the index of the credential sessionID uses for provider:
// the first free one walking forward from FNV-1a(sessionID) mod n, or the
// first serving baseURL in order when all are blocked.
func (m *MemoryCredentials) pick(provider, sessionID, baseURL string, now time.Time) (int, bool) {
	list := m.providers[provider]
	n := len(list)
	if n == 0 {
		return 0, false
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(sessionID))
	start := int(h.Sum32() % uint32(n))
	for k := range n {
		i := (start + k) % n
		if list[i].serves(baseURL) && !list[i].blocked(now) {
			return i, true
		}
	}
	for i, c := range list {
		if c.serves(baseURL) {
			return i, true
		}
	}
	return 0, false
}

func (c *memCredential) blocked(now time.Time) bool { return now.Before(c.blockedUntil) }

func (c *memCredential) serves(baseURL string) bool {
	return baseURL == "" || c.BaseURL == "" || c.BaseURL == baseURL
}
