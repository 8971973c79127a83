package limiter

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/transcript"
)

// TestQuietKeysAreForgotten: a process that sees a new credential for
// every user keeps only the keys that hold something (a hint, an open
// circuit, failures still counted), however many it has seen.
func TestQuietKeysAreForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := New(Config{FailureThreshold: 3, Window: 10 * time.Second, OpenFor: 30 * time.Second})
		require.NoError(t, err)
		answered := &transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop}
		overloaded := &transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError,
			HTTPStatus: 529, ErrorType: "overloaded_error", ErrorMessage: "529 overloaded"}
		limited := &transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError,
			HTTPStatus: 429, ErrorType: "rate_limit_error", ErrorMessage: "429 rate limit exceeded",
			Headers: map[string]string{"retry-after": "60"}}
		run := func(cred string, last *transcript.Message) {
			until, _, _ := l.Admit("p", cred)
			require.True(t, until.IsZero(), cred)
			l.Done("p", cred, last)
		}
		run("held", limited)
		run("failing", overloaded)
		run("failing", overloaded)
		for range 3 {
			run("open", overloaded)
		}
		for i := range 10_000 {
			run(fmt.Sprint("user", i), answered)
		}
		assert.LessOrEqual(t, len(l.keys), minSweep, "quiet keys are kept")

		_, _, reason := l.Admit("p", "held")
		assert.Equal(t, RateLimited, reason, "a held key was forgotten")
		_, _, reason = l.Admit("p", "open")
		assert.Equal(t, CircuitOpen, reason, "an open circuit was forgotten")
		run("failing", overloaded)
		_, _, reason = l.Admit("p", "failing")
		assert.Equal(t, CircuitOpen, reason, "two failures within the window were forgotten")

		// Past the window and the holds, a sweep forgets them all.
		time.Sleep(5 * time.Minute)
		run("failing", answered) // half-open probe succeeds: closed
		run("open", answered)
		for i := range 2 * minSweep {
			run(fmt.Sprint("late", i), answered)
		}
		time.Sleep(10 * time.Second)
		for i := range 2 * minSweep {
			run(fmt.Sprint("later", i), answered)
		}
		for _, k := range []string{"p/held", "p/failing", "p/open"} {
			_, kept := l.keys[k]
			assert.False(t, kept, "%s is kept once quiet", k)
		}
	})
}
