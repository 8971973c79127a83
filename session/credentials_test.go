package session_test

import (
	"hash/fnv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/session"
)

func TestMemoryCredentials(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	creds := []session.Credential{
		{ID: "k0", Provider: "p", Type: "api_key"},
		{ID: "k1", Provider: "p", Type: "api_key"},
		{ID: "k2", Provider: "p", Type: "api_key"},
	}
	store := session.NewMemoryCredentials(clock, creds...)

	h := fnv.New32a()
	h.Write([]byte("sess"))
	start := int(h.Sum32() % 3)
	c, ok := store.Current("p", "sess")
	require.True(t, ok)
	assert.Equal(t, creds[start].ID, c.ID, "a session starts at FNV-1a(id) mod n")

	// Block it: the next free one, walking forward.
	assert.True(t, store.MarkUsageLimitReached("p", "sess", 10*time.Second, ""))
	c2, _ := store.Current("p", "sess")
	assert.Equal(t, creds[(start+1)%3].ID, c2.ID)
	assert.Equal(t, now.Add(10*time.Second), store.BlockedUntil("p", c.ID))

	// Block the other two: all blocked, the first in order is used, no
	// switch.
	assert.True(t, store.MarkUsageLimitReached("p", "sess", 0, ""))
	assert.False(t, store.MarkUsageLimitReached("p", "sess", 0, ""))
	c3, _ := store.Current("p", "sess")
	assert.Equal(t, "k0", c3.ID)

	// Time passes: the 10 s block ends first, the 60 s default later.
	now = now.Add(11 * time.Second)
	c4, _ := store.Current("p", "sess")
	assert.Equal(t, c.ID, c4.ID)
	assert.True(t, store.BlockedUntil("p", c.ID).IsZero())

	_, ok = store.Current("other", "sess")
	assert.False(t, ok)
	assert.False(t, store.MarkUsageLimitReached("other", "sess", 0, ""))
}

func TestMemoryCredentialsBaseURL(t *testing.T) {
	store := session.NewMemoryCredentials(nil,
		session.Credential{ID: "eu", Provider: "p", Type: "api_key", BaseURL: "https://eu.example"},
		session.Credential{ID: "us", Provider: "p", Type: "api_key", BaseURL: "https://us.example"})
	// Only one credential serves the EU endpoint: no switch there.
	assert.False(t, store.MarkUsageLimitReached("p", "s", time.Minute, "https://eu.example"))
}
