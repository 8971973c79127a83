package session_test

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// TestNilOptionsAreRefused: every option that takes something nil-able
// refuses nil as WithObserver does, with an error that names it, instead of
// keeping it for the first failure to dereference.
func TestNilOptionsAreRefused(t *testing.T) {
	for _, c := range []struct {
		opt  session.Option
		want string
	}{
		{session.WithHistory(nil), "session: nil History"},
		{session.WithCredentials(nil), "session: nil CredentialStore"},
		{session.WithLimiter(nil), "session: nil Limiter"},
		{session.WithSummarizer(nil), "session: nil Summarizer"},
		{session.WithRandom(nil), "session: nil random source (WithRandom)"},
		{session.WithLogger(nil), "session: nil Logger"},
		{session.WithLogger(&slog.Logger{}), "session: Logger with a nil Handler (a zero slog.Logger)"},
		{session.WithObserver(nil), "session: nil Observer"},
	} {
		t.Run(c.want, func(t *testing.T) {
			s, err := session.New(scripted.New(scripted.Script{}), c.opt)
			assert.EqualError(t, err, c.want)
			assert.Nil(t, s)
		})
	}
}
