package session_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/limiter"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// TestOptionAfterNew: an option called on a session New already returned
// (an Option is a plain function anyone can call) returns an error that
// names it, changes nothing, and does not panic; so does one called on a
// nil *Session.
func TestOptionAfterNew(t *testing.T) {
	s, err := session.New(scripted.New(scripted.Script{}), session.WithSessionID("kept"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	creds, err := credentials.NewMemoryCredentials(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := policy.DefaultConfig()
	cfg.Retry.MaxRetries = 9
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap.SessionID = "other"
	lim, err := limiter.New(limiter.Config{})
	if err != nil {
		t.Fatal(err)
	}
	opts := map[string]session.Option{
		"WithConfig":          session.WithConfig(cfg),
		"WithModel":           session.WithModel(policy.Model{Provider: "p", ID: "other"}),
		"WithSessionID":       session.WithSessionID("other"),
		"WithHistory":         session.WithHistory(&history.MemoryHistory{}),
		"WithRecoveryHistory": session.WithRecoveryHistory(true),
		"WithCredentials":     session.WithCredentials(creds),
		"WithLimiter":         session.WithLimiter(lim),
		"WithSummarizer":      session.WithSummarizer(policy.DigestSummarizer{}),
		"WithRandom":          session.WithRandom(func() float64 { return 0.5 }),
		"WithLogger":          session.WithLogger(slog.New(slog.DiscardHandler)),
		"WithSnapshot":        session.WithSnapshot(snap),
		"WithObserver":        session.WithObserver(&nopObserver{}),
	}
	h := s.History()
	for name, o := range opts {
		for _, target := range []*session.Session{s, nil} {
			err := o(target)
			if err == nil || !strings.Contains(err.Error(), name) || !strings.HasPrefix(err.Error(), "session: ") {
				t.Errorf("%s on a session already made (%v): %v, want an error naming it", name, target != nil, err)
			}
		}
	}
	if s.ID() != "kept" || s.History() != h || s.Config().Retry.MaxRetries == 9 {
		t.Errorf("an option after New changed the session: ID %q, config %+v", s.ID(), s.Config().Retry)
	}
}
