package session_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

const usageLimit = "429 usage limit reached"

func twoKeys() []session.Credential {
	return []session.Credential{
		{ID: "key-a", Provider: "scripted", Type: "api_key"},
		{ID: "key-b", Provider: "scripted", Type: "api_key"},
	}
}

// A usage limit with a free second credential switches at once (§3.3).
func TestUsageLimitSwitchesCredential(t *testing.T) {
	bubble(t, func(t *testing.T) {
		store := session.NewMemoryCredentials(nil, twoKeys()...)
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
		cfg   session.Config
		text  string
		block time.Duration
		wait  time.Duration
	}{
		{"reference, with a hint", session.ReferenceConfig(), usageLimit + "; retry-after-ms: 45000", 45 * time.Second, 2 * time.Second},
		{"reference, without a hint", session.ReferenceConfig(), usageLimit, 60 * time.Second, 2 * time.Second},
		{"defaults, with a hint", session.DefaultConfig(), usageLimit + "; retry-after-ms: 45000", 45 * time.Second, 45 * time.Second},
		{"defaults, without a hint", session.DefaultConfig(), usageLimit, 60 * time.Second, 2 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				store := session.NewMemoryCredentials(nil, session.Credential{ID: "only", Provider: "scripted", Type: "api_key"})
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
		store := session.NewMemoryCredentials(nil,
			session.Credential{ID: "key", Provider: "scripted", Type: "api_key"},
			session.Credential{ID: "login", Provider: "scripted", Type: "oauth"})
		s, _, rec := newSession(t, []scripted.Call{fail(usageLimit), ok("done")}, session.WithCredentials(store))
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Contains(t, rec.recovery()[0], "2000ms")
	})
}

func TestMaxDelayCapsTheWait(t *testing.T) {
	bubble(t, func(t *testing.T) {
		cfg := session.DefaultConfig()
		cfg.Retry.MaxDelayMs = 3000
		s, _, rec := newSession(t, []scripted.Call{fail(service503), fail(service503), fail(service503), ok("x")}, session.WithConfig(cfg))
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		r := rec.recovery()
		assert.Contains(t, r[0], " 2000ms ")
		assert.Contains(t, r[1], " 3000ms ")
		assert.Contains(t, r[2], " 3000ms ")
	})
}

func TestJitterIsInjectable(t *testing.T) {
	bubble(t, func(t *testing.T) {
		cfg := session.DefaultConfig()
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

func TestHonorRetryAfter(t *testing.T) {
	bubble(t, func(t *testing.T) {
		cfg := session.DefaultConfig()
		cfg.Retry.HonorRetryAfter = true
		s, _, rec := newSession(t, []scripted.Call{fail("429 rate limit; retry-after: 5"), fail("429 rate limit; retry-after: 1"), ok("x")}, session.WithConfig(cfg))
		start := time.Now()
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		r := rec.recovery()
		assert.Contains(t, r[0], " 5000ms ", "the hint is longer than 2000")
		assert.Contains(t, r[1], " 4000ms ", "the backoff is longer than the hint")
		assert.Equal(t, 9*time.Second, time.Since(start))
	})
	// On by default: a 429 with retry-after: 10 waits 10 s.
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{fail("429 rate limit; retry-after: 10"), ok("x")})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Contains(t, rec.recovery()[0], " 10000ms ")
	})
	// Off in the reference's policy: the hint only blocks credentials.
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{fail("429 rate limit; retry-after: 5"), ok("x")}, session.WithConfig(session.ReferenceConfig()))
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Contains(t, rec.recovery()[0], " 2000ms ")
	})
}

// A hint above the cap ends the chain at once instead of sleeping.
func TestHintAboveCapEndsChain(t *testing.T) {
	bubble(t, func(t *testing.T) {
		cfg := session.DefaultConfig()
		cfg.Retry.HonorRetryAfter = true
		cfg.Retry.MaxDelayMs = 10_000
		s, _, rec := newSession(t, []scripted.Call{fail(service503), fail("429 rate limit; retry-after: 60")}, session.WithConfig(cfg))
		start := time.Now()
		err := s.Prompt(context.Background(), "hi")
		require.ErrorIs(t, err, session.ErrExhausted)
		assert.Equal(t, 2*time.Second, time.Since(start), "no wait for the 60 s hint")
		assert.Equal(t, []string{
			`retry_start 1/3 2000ms "503 Service Unavailable"`,
			`retry_end fail 1 "429 rate limit; retry-after: 60"`,
		}, rec.recovery())
	})
}

// The extended rules (the default) see what the seed rules miss.
func TestExtendedRulesSetting(t *testing.T) {
	bubble(t, func(t *testing.T) {
		cfg := session.DefaultConfig()
		cfg.Retry.Rules = classify.Seed
		s, _, rec := newSession(t, []scripted.Call{fail("read ECONNRESET")}, session.WithConfig(cfg))
		require.ErrorIs(t, s.Prompt(context.Background(), "hi"), session.ErrProvider)
		assert.Empty(t, rec.recovery())
	})
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{fail("read ECONNRESET"), ok("x")})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Len(t, rec.recovery(), 2)
	})
}

// Typed fields from the agent reach the classifier: a 529 with no text.
func TestTypedStatusRetries(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{{StopReason: "error", Status: 529}, ok("x")})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Equal(t, []string{`retry_start 1/3 2000ms ""`, "retry_end ok 1"}, rec.recovery())
	})
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	cfg := session.DefaultConfig()
	cfg.Retry.Jitter = 2
	s, err := session.New(scripted.New(scripted.Script{}), session.WithConfig(cfg))
	assert.Nil(t, s)
	assert.ErrorContains(t, err, "retry.jitter")
	_, err = session.New(nil)
	assert.ErrorContains(t, err, "nil Agent")
	_, err = session.New(scripted.New(scripted.Script{}), session.WithSessionID(""))
	assert.ErrorContains(t, err, "empty session ID")
}
