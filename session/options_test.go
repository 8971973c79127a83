package session_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

const usageLimit = "429 usage limit reached"

func twoKeys() []policy.Credential {
	return []policy.Credential{
		{ID: "key-a", Provider: "scripted", Type: "api_key"},
		{ID: "key-b", Provider: "scripted", Type: "api_key"},
	}
}

// A usage limit with a free second credential switches at once (§3.3).
func TestUsageLimitSwitchesCredential(t *testing.T) {
	bubble(t, func(t *testing.T) {
		store, err := credentials.NewMemoryCredentials(nil, twoKeys()...)
		if err != nil {
			t.Fatal(err)
		}
		first, found := store.Current("scripted", "test-session")
		require.True(t, found)
		s, _, rec := newSession(t, []scripted.Call{fail(usageLimit + "; retry-after: 30"), ok("done")}, session.WithCredentials(store))
		start := time.Now()
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Zero(t, time.Since(start))
		assert.Equal(t, []string{
			`retry_start 1/3 0ms "429 usage limit reached; retry-after: 30"`,
			"retry_end ok 1",
		}, rec.recovery())
		assert.Equal(t, start.Add(30*time.Second), store.BlockedUntil("scripted", first.ID), "blocked for the hint")
		now, _ := store.Current("scripted", "test-session")
		assert.NotEqual(t, first.ID, now.ID, "the session moved to the free credential")
	})
}

// Without a free credential the normal delay applies (under the defaults,
// at least the hint), and the credential is blocked for the hint, else
// 60 s.
func TestUsageLimitWithoutFreeCredential(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   policy.Config
		text  string
		block time.Duration
		wait  time.Duration
	}{
		{"reference, with a hint", policy.ReferenceConfig(), usageLimit + "; retry-after-ms: 45000", 45 * time.Second, 2 * time.Second},
		{"reference, without a hint", policy.ReferenceConfig(), usageLimit, 60 * time.Second, 2 * time.Second},
		{"defaults, with a hint", policy.DefaultConfig(), usageLimit + "; retry-after-ms: 45000", 45 * time.Second, 45 * time.Second},
		{"defaults, without a hint", policy.DefaultConfig(), usageLimit, 60 * time.Second, 2 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				store, err := credentials.NewMemoryCredentials(nil, policy.Credential{ID: "only", Provider: "scripted", Type: "api_key"})
				if err != nil {
					t.Fatal(err)
				}
				s, _, rec := newSession(t, []scripted.Call{fail(c.text), ok("done")}, session.WithCredentials(store), session.WithConfig(c.cfg))
				start := time.Now()
				done := promptAsync(s, "hi")
				synctest.Wait()
				assert.Equal(t, start.Add(c.block), store.BlockedUntil("scripted", "only"))
				require.NoError(t, <-done)
				assert.Equal(t, c.wait, time.Since(start))
				assert.Equal(t, fmt.Sprintf(`retry_start 1/3 %dms "%s"`, c.wait.Milliseconds(), c.text), rec.recovery()[0])
			})
		})
	}
}

// A different type is not a switch.
func TestUsageLimitOtherTypeIsNoSwitch(t *testing.T) {
	bubble(t, func(t *testing.T) {
		store, err := credentials.NewMemoryCredentials(nil,
			policy.Credential{ID: "key", Provider: "scripted", Type: "api_key"},
			policy.Credential{ID: "login", Provider: "scripted", Type: "oauth"})
		if err != nil {
			t.Fatal(err)
		}
		s, _, rec := newSession(t, []scripted.Call{fail(usageLimit), ok("done")}, session.WithCredentials(store))
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Contains(t, rec.recovery()[0], "2000ms")
	})
}

func TestJitterIsInjectable(t *testing.T) {
	bubble(t, func(t *testing.T) {
		cfg := policy.DefaultConfig()
		cfg.Retry.Jitter = 0.5
		s, _, rec := newSession(t, []scripted.Call{fail(service503), fail(service503), ok("x")},
			session.WithConfig(cfg), session.WithRandom(func() float64 { return 0.5 }))
		start := time.Now()
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		r := rec.recovery()
		assert.Contains(t, r[0], " 1500ms ", "2000 × (1 − 0.5 × 0.5)")
		assert.Contains(t, r[1], " 3000ms ")
		assert.Equal(t, 4500*time.Millisecond, time.Since(start))
	})
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	cfg := policy.DefaultConfig()
	cfg.Retry.Jitter = 2
	s, err := session.New(scripted.New(scripted.Script{}), session.WithConfig(cfg))
	assert.Nil(t, s)
	assert.ErrorContains(t, err, "retry.jitter")
	_, err = session.New(nil)
	assert.ErrorContains(t, err, "nil Agent")
	_, err = session.New(scripted.New(scripted.Script{}), session.WithSessionID(""))
	assert.ErrorContains(t, err, "empty session ID")
}
