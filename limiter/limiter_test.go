package limiter_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentfsm/agentfsm/limiter"
	"github.com/agentfsm/agentfsm/transcript"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func msg(status int, errType, text string, headers map[string]string) *transcript.Message {
	return &transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError, HTTPStatus: status, ErrorType: errType,
		ErrorMessage: text, Headers: headers}
}

var (
	answered   = &transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop}
	overloaded = msg(529, "overloaded_error", "529 overloaded", nil)
)

func rateLimited(retryAfter string) *transcript.Message {
	return msg(429, "rate_limit_error", "429 rate limit exceeded", map[string]string{"retry-after": retryAfter})
}

func newLimiter(t *testing.T, cfg limiter.Config) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(cfg)
	require.NoError(t, err)
	return l
}

// admitted asks l for a run and reports whether it may go.
func admitted(l *limiter.Limiter, cred string) bool {
	until, _, _ := l.Admit("anthropic", cred)
	return until.IsZero()
}

func TestNewRefusesNegativeDurations(t *testing.T) {
	for name, cfg := range map[string]limiter.Config{
		"Window": {Window: -1}, "OpenFor": {OpenFor: -time.Second}, "ProbeWait": {ProbeWait: -1}, "MaxHold": {MaxHold: -1},
	} {
		_, err := limiter.New(cfg)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "limiter: negative "+name)
	}
}

func TestKey(t *testing.T) {
	assert.Equal(t, "anthropic/work", limiter.Key("anthropic", "work"))
	assert.Equal(t, "anthropic", limiter.Key("anthropic", ""))
}

// TestRetryHintHoldsTheKey: a 429 with retry-after holds its key, and only
// its key, until the hint runs out; MaxHold bounds it.
func TestRetryHintHoldsTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, limiter.Config{MaxHold: 10 * time.Second})
		start := time.Now()
		require.True(t, admitted(l, "a"))
		l.Done("anthropic", "a", rateLimited("2"))
		until, key, reason := l.Admit("anthropic", "a")
		assert.Equal(t, start.Add(2*time.Second), until)
		assert.Equal(t, "anthropic/a", key)
		assert.Equal(t, limiter.RateLimited, reason)
		assert.True(t, admitted(l, "b"), "another credential is another key")
		time.Sleep(2*time.Second - time.Millisecond)
		assert.False(t, admitted(l, "a"), "not a millisecond before the deadline")
		time.Sleep(time.Millisecond)
		assert.True(t, admitted(l, "a"))

		// A day-long hint holds for MaxHold; a shorter hint later does not
		// shorten a hold.
		l.Done("anthropic", "a", rateLimited("86400"))
		l.Done("anthropic", "a", rateLimited("1"))
		until, _, _ = l.Admit("anthropic", "a")
		assert.Equal(t, time.Now().Add(10*time.Second), until)

		// An overload with a hint says overloaded.
		l.Done("anthropic", "c", msg(529, "overloaded_error", "overloaded", map[string]string{"retry-after": "3"}))
		_, _, reason = l.Admit("anthropic", "c")
		assert.Equal(t, limiter.Overloaded, reason)
	})
}

// TestWhatHoldsNothing: a 429 without a hint, a fatal error, an aborted
// run, a run that made no call and a success hold nothing.
func TestWhatHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, limiter.Config{})
		for _, m := range []*transcript.Message{
			msg(429, "rate_limit_error", "429 rate limit exceeded", nil),
			msg(400, "invalid_request_error", "400 bad request, retry-after: 9", nil),
			{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonAborted, ErrorMessage: "retry-after: 9"},
			nil,
			answered,
		} {
			require.True(t, admitted(l, "a"))
			l.Done("anthropic", "a", m)
			assert.True(t, admitted(l, "a"), "%+v", m)
		}
	})
}

// TestCircuit: FailureThreshold overload failures within Window open the
// key's circuit for OpenFor; then one probe goes while the others wait;
// its failure opens the circuit again, its success closes it, and a probe
// that made no call lets another go.
func TestCircuit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, limiter.Config{FailureThreshold: 3, Window: 10 * time.Second, OpenFor: 30 * time.Second, ProbeWait: 2 * time.Second})
		fail := func() {
			require.True(t, admitted(l, "a"))
			l.Done("anthropic", "a", overloaded)
		}
		// Two failures, then one 11 s later: outside the window, it stays
		// closed.
		fail()
		fail()
		time.Sleep(11 * time.Second)
		fail()
		require.True(t, admitted(l, "a"))
		l.Done("anthropic", "a", nil)
		// Two more within the window: open.
		fail()
		fail()
		opened := time.Now()
		until, _, reason := l.Admit("anthropic", "a")
		assert.Equal(t, limiter.CircuitOpen, reason)
		assert.Equal(t, opened.Add(30*time.Second), until)
		assert.True(t, admitted(l, "b"), "another key's circuit is its own")

		time.Sleep(30 * time.Second)
		require.True(t, admitted(l, "a"), "half-open: one probe")
		until, _, reason = l.Admit("anthropic", "a")
		assert.Equal(t, limiter.Probe, reason)
		assert.Equal(t, time.Now().Add(2*time.Second), until)
		// The probe fails: open again.
		l.Done("anthropic", "a", overloaded)
		_, _, reason = l.Admit("anthropic", "a")
		assert.Equal(t, limiter.CircuitOpen, reason)

		time.Sleep(30 * time.Second)
		require.True(t, admitted(l, "a"), "the next probe")
		// It made no call (aborted before it): another may probe.
		l.Done("anthropic", "a", nil)
		require.True(t, admitted(l, "a"), "another probe")
		assert.False(t, admitted(l, "a"))
		// It succeeds: closed, everyone goes.
		l.Done("anthropic", "a", answered)
		for range 10 {
			require.True(t, admitted(l, "a"))
			l.Done("anthropic", "a", answered)
		}
	})
}

// TestNoCircuit: a negative FailureThreshold shares the hints only.
func TestNoCircuit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, limiter.Config{FailureThreshold: -1})
		for range 100 {
			require.True(t, admitted(l, "a"))
			l.Done("anthropic", "a", overloaded)
		}
	})
}
