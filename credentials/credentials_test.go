package credentials_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/policy"
)

func TestMemoryCredentials(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	creds := []policy.Credential{
		{ID: "k0", Provider: "p", Type: "api_key"},
		{ID: "k1", Provider: "p", Type: "api_key"},
		{ID: "k2", Provider: "p", Type: "api_key"},
	}
	store, err := credentials.NewMemoryCredentials(clock, creds...)
	if err != nil {
		t.Fatal(err)
	}

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
	store, err := credentials.NewMemoryCredentials(nil,
		policy.Credential{ID: "eu", Provider: "p", Type: "api_key", BaseURL: "https://eu.example"},
		policy.Credential{ID: "us", Provider: "p", Type: "api_key", BaseURL: "https://us.example"})
	if err != nil {
		t.Fatal(err)
	}
	// Only one credential serves the EU endpoint: no switch there.
	assert.False(t, store.MarkUsageLimitReached("p", "s", time.Minute, "https://eu.example"))
}

// A credential whose base URL holds a password serves the endpoint as a
// provider adapter's model gives it, the password masked.
func TestMemoryCredentialsBaseURLWithPassword(t *testing.T) {
	store, err := credentials.NewMemoryCredentials(nil,
		policy.Credential{ID: "a", Provider: "p", Type: "api_key", BaseURL: "https://u:pw@proxy.example/"},
		policy.Credential{ID: "b", Provider: "p", Type: "api_key", BaseURL: "https://u:pw@proxy.example/"},
		policy.Credential{ID: "c", Provider: "p", Type: "api_key", BaseURL: "https://other.example/"})
	require.NoError(t, err)
	assert.True(t, store.MarkUsageLimitReached("p", "s", time.Minute, "https://u:xxxxx@proxy.example/"), "a switch to the other of the two")
}

// sessionsAt returns count session IDs whose start credential among n is
// i: FNV-1a(id) mod n == i.
func sessionsAt(i, n, count int) []string {
	var ids []string
	for k := 0; len(ids) < count; k++ {
		id := fmt.Sprintf("session-%d", k)
		h := fnv.New32a()
		h.Write([]byte(id))
		if int(h.Sum32()%uint32(n)) == i {
			ids = append(ids, id)
		}
	}
	return ids
}

// issue item 12: with keys A (api_key), B (oauth), C (api_key) and a
// session on A, a usage limit switches to C, and Current never hands out B.
func TestMemoryCredentialsSwitchAndCurrentAgreeOnType(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store, err := credentials.NewMemoryCredentials(func() time.Time { return now },
		policy.Credential{ID: "A", Provider: "p", Type: "api_key"},
		policy.Credential{ID: "B", Provider: "p", Type: "oauth"},
		policy.Credential{ID: "C", Provider: "p", Type: "api_key"})
	if err != nil {
		t.Fatal(err)
	}
	onA := sessionsAt(0, 3, 1)[0]
	c, _ := store.Current("p", onA)
	require.Equal(t, "A", c.ID)

	assert.True(t, store.MarkUsageLimitReached("p", onA, time.Minute, ""), "C is free and of A's type")
	c, _ = store.Current("p", onA)
	assert.Equal(t, "C", c.ID)

	assert.False(t, store.MarkUsageLimitReached("p", onA, 2*time.Minute, ""), "B is free, but an oauth credential")
	c, _ = store.Current("p", onA)
	assert.Equal(t, "A", c.ID, "all of its type blocked: the first of its type in order, never B")

	now = now.Add(time.Minute)
	c, _ = store.Current("p", onA)
	assert.Equal(t, "A", c.ID, "A is free again")

	// A session that starts on B has no other oauth credential: no switch,
	// and it stays on B while the api keys are free.
	onB := sessionsAt(1, 3, 1)[0]
	c, _ = store.Current("p", onB)
	require.Equal(t, "B", c.ID)
	assert.False(t, store.MarkUsageLimitReached("p", onB, time.Minute, ""))
	c, _ = store.Current("p", onB)
	assert.Equal(t, "B", c.ID)

	// A session that starts on C while another session has blocked C walks
	// forward past B (free, but oauth) to A: its type is its start
	// credential's, whatever other sessions blocked.
	now = now.Add(time.Hour)
	ids := sessionsAt(2, 3, 2)
	other, onC := ids[0], ids[1]
	c, _ = store.Current("p", other)
	require.Equal(t, "C", c.ID)
	require.True(t, store.MarkUsageLimitReached("p", other, time.Minute, ""))
	c, _ = store.Current("p", onC)
	assert.Equal(t, "A", c.ID)
}

// issue item 12: for random stores and random sessions, clocks and usage
// limits, Current only hands out credentials of the session's type (that of
// its start credential), a free one whenever one of that type is free;
// MarkUsageLimitReached blocks the credential last handed out and reports a
// switch exactly when another credential of that type is free, which the
// next Current then hands out.
func TestMemoryCredentialsOneRuleProperty(t *testing.T) {
	types := []string{"api_key", "oauth", "token"}
	rapid.Check(t, func(t *rapid.T) {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		n := rapid.IntRange(1, 6).Draw(t, "n")
		var creds []policy.Credential
		for i := range n {
			creds = append(creds, policy.Credential{ID: fmt.Sprint("k", i), Provider: "p", Type: rapid.SampledFrom(types).Draw(t, "type")})
		}
		store, err := credentials.NewMemoryCredentials(func() time.Time { return now }, creds...)
		if err != nil {
			t.Fatal(err)
		}
		sessions := []string{"s0", "s1", "s2", "s3"}
		startType := func(id string) string {
			h := fnv.New32a()
			h.Write([]byte(id))
			return creds[h.Sum32()%uint32(n)].Type
		}
		freeOfType := func(typ string) []string {
			var out []string
			for _, c := range creds {
				if c.Type == typ && store.BlockedUntil("p", c.ID).IsZero() {
					out = append(out, c.ID)
				}
			}
			return out
		}
		current := func(id string) policy.Credential {
			c, ok := store.Current("p", id)
			if !ok {
				t.Fatalf("no credential for %s", id)
			}
			if c.Type != startType(id) {
				t.Fatalf("%s started on type %s, got %s (%s)", id, startType(id), c.ID, c.Type)
			}
			free := store.BlockedUntil("p", c.ID).IsZero()
			if !free && len(freeOfType(c.Type)) > 0 {
				t.Fatalf("%s got blocked %s while %v are free", id, c.ID, freeOfType(c.Type))
			}
			return c
		}
		last := map[string]policy.Credential{}
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			id := rapid.SampledFrom(sessions).Draw(t, "session")
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				last[id] = current(id)
			case 1:
				hint := time.Duration(rapid.IntRange(0, 120).Draw(t, "hint")) * time.Second
				prev, had := last[id]
				switched := store.MarkUsageLimitReached("p", id, hint, "")
				if had && !now.Before(store.BlockedUntil("p", prev.ID)) {
					t.Fatalf("%s: %s, the credential last handed out, is not blocked", id, prev.ID)
				}
				free := freeOfType(startType(id))
				if switched != (len(free) > 0) {
					t.Fatalf("%s: switched = %v with %v free of its type", id, switched, free)
				}
				c := current(id)
				last[id] = c
				if switched && (c.ID == prev.ID || !store.BlockedUntil("p", c.ID).IsZero()) {
					t.Fatalf("%s: switched, but Current hands out %s (was %s)", id, c.ID, prev.ID)
				}
			case 2:
				now = now.Add(time.Duration(rapid.IntRange(0, 90).Draw(t, "tick")) * time.Second)
			}
		}
	})
}

func TestEnvSecrets(t *testing.T) {
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-ant", "TEAM_KEY": "sk-team", "EMPTY": ""}
	r := credentials.EnvSecrets{Lookup: func(name string) (string, bool) { v, ok := env[name]; return v, ok }}
	ctx := context.Background()
	for _, c := range []struct {
		cred policy.Credential
		want string
		err  string
	}{
		{policy.Credential{ID: "a", Provider: "anthropic"}, "sk-ant", ""},
		{policy.Credential{ID: "b", Provider: "openai", Secret: "env:TEAM_KEY"}, "sk-team", ""},
		{policy.Credential{ID: "c", Provider: "openai"}, "", "OPENAI_API_KEY is not set"},
		{policy.Credential{ID: "d", Provider: "other"}, "", `provider "other" has no usual variable`},
		{policy.Credential{ID: "e", Provider: "openai", Secret: "vault:x"}, "", "not of the form env:NAME"},
		{policy.Credential{ID: "f", Provider: "openai", Secret: "env:EMPTY"}, "", "EMPTY is not set"},
		{policy.Credential{ID: "g", Provider: "openai", Secret: "env:"}, "", "not of the form"},
	} {
		got, err := r.Resolve(ctx, c.cred)
		if c.err == "" {
			assert.NoError(t, err)
			assert.Equal(t, c.want, got)
			continue
		}
		assert.ErrorIs(t, err, credentials.ErrNoSecret)
		assert.ErrorContains(t, err, c.err)
		assert.ErrorContains(t, err, `"`+c.cred.ID+`"`, "the error names the credential")
	}
}

// The zero MemoryCredentials is an empty store, as the zero MemoryHistory
// is an empty history: it hands out nothing and switches nothing, and
// does not panic.
func TestMemoryCredentialsZeroValue(t *testing.T) {
	var store credentials.MemoryCredentials
	_, ok := store.Current("p", "s")
	assert.False(t, ok)
	assert.False(t, store.MarkUsageLimitReached("p", "s", time.Second, ""))
	assert.True(t, store.BlockedUntil("p", "k").IsZero())
}

// Two credentials of one provider with one ID would be one credential to
// MarkUsageLimitReached's switch and another to Current: the store would
// report a switch and hand out the same ID again. The constructor refuses
// them, naming the duplicate; the same ID under two providers is two
// credentials.
func TestNewMemoryCredentialsRefusesDuplicates(t *testing.T) {
	_, err := credentials.NewMemoryCredentials(nil,
		policy.Credential{ID: "k0", Provider: "p", Type: "api_key"},
		policy.Credential{ID: "k1", Provider: "p", Type: "api_key"},
		policy.Credential{ID: "k0", Provider: "p", Type: "api_key", BaseURL: "https://elsewhere"},
	)
	require.Error(t, err)
	assert.ErrorContains(t, err, `credentials: credential 2: provider "p" already has a credential "k0" (credential 0)`)

	_, err = credentials.NewMemoryCredentials(nil, policy.Credential{Provider: "p", Type: "api_key"})
	assert.EqualError(t, err, `credentials: credential 0 (provider "p") has no ID`)

	store, err := credentials.NewMemoryCredentials(nil,
		policy.Credential{ID: "k0", Provider: "p", Type: "api_key"},
		policy.Credential{ID: "k0", Provider: "q", Type: "api_key"},
	)
	require.NoError(t, err)
	c, ok := store.Current("q", "s")
	require.True(t, ok)
	assert.Equal(t, "q", c.Provider)
}
