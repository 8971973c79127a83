package session_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/limiter"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
)

// rateLimited429 is a 429 that says to come back in secs seconds.
func rateLimited429(secs string) scripted.Call {
	return scripted.Call{StopReason: "error", ErrorMessage: "429 rate limit exceeded", Status: 429, ErrorType: "rate_limit_error",
		Headers: map[string]string{"retry-after": secs}}
}

func newLimiter(t *testing.T, cfg limiter.Config) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(cfg)
	require.NoError(t, err)
	return l
}

// TestSharedLimitHoldsTheOtherSessions: a 429 with retry-after 2 that one
// session gets holds the other session on the same provider and
// credential: its prompt makes no call before the deadline, waits in
// backoff (wait_shared, shared_limit_wait, get_state's shared limit) and
// runs at the deadline.
func TestSharedLimitHoldsTheOtherSessions(t *testing.T) {
	bubble(t, func(t *testing.T) {
		l := newLimiter(t, limiter.Config{})
		a, _, _ := newSession(t, []scripted.Call{rateLimited429("2"), ok("a done")}, session.WithLimiter(l), session.WithSessionID("a"))
		b, bAgent, rec := newSession(t, []scripted.Call{ok("b done")}, session.WithLimiter(l), session.WithSessionID("b"))
		start := time.Now()
		aDone := promptAsync(a, "hi")
		synctest.Wait()
		require.Equal(t, states.Backoff, a.Status().State, "a waits out its own 429")
		bDone := promptAsync(b, "hi")
		synctest.Wait()
		st := b.Status()
		require.Equal(t, states.Backoff, st.State, "b is held: it waits instead of calling")
		assert.Zero(t, st.Attempt, "a shared wait counts no attempt")
		assert.Equal(t, scripted.DefaultModel.Provider, st.SharedLimitKey)
		assert.Equal(t, limiter.RateLimited, st.SharedLimitReason)
		assert.Equal(t, start.Add(2*time.Second).UTC(), st.SharedLimitUntil)
		assert.Equal(t, 1, bAgent.Remaining(), "no call before the shared deadline")
		require.NoError(t, <-bDone)
		require.NoError(t, <-aDone)
		assert.Equal(t, 2*time.Second, time.Since(start))
		until := start.Add(2 * time.Second).UTC().Format("15:04:05.000")
		assert.Equal(t, []string{
			"shared_limit_wait " + scripted.DefaultModel.Provider + " rate_limited " + until,
			"idle>backoff wait_shared",
			"backoff>continuing elapsed",
			"agent_start",
			"message stop",
			"agent_end",
			"continuing>classifying agent_end",
			"classifying>idle accept",
		}, rec.lines())
		assert.Equal(t, 2*time.Second, rec.timeOf("backoff>continuing"))
		assert.Zero(t, b.Status().SharedLimitKey, "the wait is over")
	})
}

// TestSharedLimitHoldsARetry: a session whose own retry comes before the
// shared deadline (another session's 429 said 5 s) waits on in backoff
// until that deadline, and says so.
func TestSharedLimitHoldsARetry(t *testing.T) {
	bubble(t, func(t *testing.T) {
		l := newLimiter(t, limiter.Config{})
		a, _, _ := newSession(t, []scripted.Call{slow(fail(service503), 100), ok("a done")}, session.WithLimiter(l), session.WithSessionID("a"))
		b, _, _ := newSession(t, []scripted.Call{rateLimited429("5"), ok("b done")}, session.WithLimiter(l), session.WithSessionID("b"))
		rec := record(a)
		start := time.Now()
		aDone := promptAsync(a, "hi") // fails at 0.1 s, retries at 2.1 s
		synctest.Wait()               // a's run is admitted before b's 429 holds the key
		bDone := promptAsync(b, "hi") // 429 at 0 s: the key is held until 5 s
		require.NoError(t, <-aDone)
		require.NoError(t, <-bDone)
		assert.Equal(t, []time.Duration{0, 5 * time.Second}, rec.timesOf("agent_start"), "a's continuation waits for the shared deadline")
		assert.Equal(t, 5*time.Second, time.Since(start))
		lines := rec.lines()
		// Its own wait ends at 2.1 s: the continuation asks the limit,
		// which holds it.
		assert.Equal(t, 2100*time.Millisecond, rec.timeOf("backoff>continuing elapsed"))
		assert.Contains(t, lines, "continuing>backoff wait_shared")
		assert.Equal(t, 1, count(lines, "shared_limit_wait"))
	})
}

func count(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if len(l) >= len(prefix) && l[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

// TestSharedCircuit: overload failures on a key open its circuit: every
// session on the key waits (circuit_open) until it half-opens, then one
// probe goes; its success closes the circuit and the others go.
func TestSharedCircuit(t *testing.T) {
	bubble(t, func(t *testing.T) {
		l := newLimiter(t, limiter.Config{FailureThreshold: 2, Window: time.Minute, OpenFor: 10 * time.Second})
		overloaded := scripted.Call{StopReason: "error", ErrorMessage: "529 overloaded", Status: 529, ErrorType: "overloaded_error"}
		// The probe's answer takes 500 ms: the other session asks while it
		// is in flight, whichever of the two wakes first at 12 s, and is
		// not let through at that same instant by a probe already over.
		slow := func(text string) scripted.Call { c := ok(text); c.LatencyMs = 500; return c }
		a, _, recA := newSession(t, []scripted.Call{overloaded, overloaded, slow("a done")}, session.WithLimiter(l), session.WithSessionID("a"))
		b, _, recB := newSession(t, []scripted.Call{slow("b done")}, session.WithLimiter(l), session.WithSessionID("b"))
		aDone := promptAsync(a, "hi") // 529 at 0 s and at 2 s: the circuit opens at 2 s until 12 s
		time.Sleep(3 * time.Second)
		bDone := promptAsync(b, "hi")
		synctest.Wait()
		assert.Equal(t, limiter.CircuitOpen, b.Status().SharedLimitReason)
		require.NoError(t, <-aDone)
		require.NoError(t, <-bDone)
		for _, at := range append(recA.timesOf("agent_start"), recB.timesOf("agent_start")...) {
			assert.False(t, at > 2*time.Second && at < 12*time.Second, "a call at %v, while the circuit was open", at)
		}
		aStarts, bStarts := recA.timesOf("agent_start"), recB.timesOf("agent_start")
		require.Len(t, aStarts, 3)
		require.Len(t, bStarts, 1)
		assert.Equal(t, []time.Duration{0, 2 * time.Second}, aStarts[:2])
		// At 12 s the circuit half-opens: one of the two is its probe, and
		// the other waits for it (probe, 1 s) and goes once it closed.
		probe, other := min(aStarts[2], bStarts[0]), max(aStarts[2], bStarts[0])
		assert.Equal(t, 12*time.Second, probe)
		assert.Equal(t, 13*time.Second, other)
		assert.Contains(t, recB.lines(), "idle>backoff wait_shared")
	})
}

// standIn plays a provider that answers 429 with retry-after to every
// request during its first window, and then answers: it counts the
// requests made in each, and notes when each was made and each 429
// answered (fake time).
type standIn struct {
	start   time.Time
	window  time.Duration
	latency time.Duration
	// hint is the retry-after of each 429, in seconds.
	hint string

	mu      sync.Mutex
	during  int
	after   int
	calls   []time.Time
	limited []time.Time // when each 429 was answered
}

func (a *standIn) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	a.mu.Lock()
	now := time.Now()
	limited := now.Sub(a.start) < a.window
	if limited {
		a.during++
	} else {
		a.after++
	}
	a.calls = append(a.calls, now)
	a.mu.Unlock()
	emit(events.AgentStart{})
	m := transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Content: transcript.TextContent("done"),
		Provider: scripted.DefaultModel.Provider, Model: scripted.DefaultModel.ID}
	if limited {
		m.StopReason, m.ErrorMessage, m.HTTPStatus, m.ErrorType = transcript.StopReasonError, "429 rate limit exceeded", 429, "rate_limit_error"
		m.Headers = map[string]string{"retry-after": a.hint}
		m.Content = nil
	}
	emit(events.MessageStart{Message: m})
	select {
	case <-time.After(a.latency):
	case <-ctx.Done():
		m.StopReason, m.ErrorMessage = transcript.StopReasonAborted, ""
	}
	if limited {
		a.mu.Lock()
		a.limited = append(a.limited, time.Now())
		a.mu.Unlock()
	}
	emit(events.MessageEnd{Message: m})
	emit(events.AgentEnd{Messages: []transcript.Message{m}})
	return nil
}

// hundredSessions starts 100 sessions on one key against a stand-in that
// answers 429 retry-after 2 for its first 2 s, one every 20 ms, each
// retrying on its own after 250 ms, 500 ms, 1 s … without honouring the
// hint (so that, alone, each would call several times in those 2 s), and
// returns the requests the stand-in saw in its first 2 s and after.
func hundredSessions(t *testing.T, shared bool) (during, after int) {
	a := &standIn{start: time.Now(), window: 2 * time.Second, latency: 10 * time.Millisecond, hint: "2"}
	cfg := policy.DefaultConfig()
	cfg.Retry.BaseDelayMs, cfg.Retry.HonorRetryAfter, cfg.Retry.MaxRetries = 250, false, 10
	var opts []session.Option
	if shared {
		opts = append(opts, session.WithLimiter(newLimiter(t, limiter.Config{})))
	}
	var wg sync.WaitGroup
	for i := range 100 {
		s, err := session.New(a, append([]session.Option{session.WithConfig(cfg), session.WithModel(scripted.DefaultModel), session.WithSessionID(fmt.Sprint("s", i))}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 20 * time.Millisecond)
			assert.NoError(t, s.Prompt(context.Background(), "hi"))
		})
	}
	wg.Wait()
	return a.during, a.after
}

// TestHundredSessionsOneKey: issue 25 §2's figure (docs/performance.md):
// with the shared limit the stand-in sees at most a handful of requests
// in its 2 s of 429s, without it hundreds; every session's turn succeeds
// either way.
func TestHundredSessionsOneKey(t *testing.T) {
	bubble(t, func(t *testing.T) {
		during, after := hundredSessions(t, true)
		t.Logf("with the shared limit: %d requests during the first 2 s, %d after", during, after)
		assert.LessOrEqual(t, during, 5)
		assert.Equal(t, 100, after)
	})
	bubble(t, func(t *testing.T) {
		during, after := hundredSessions(t, false)
		t.Logf("without it: %d requests during the first 2 s, %d after", during, after)
		assert.GreaterOrEqual(t, during, 200)
		assert.Equal(t, 100, after)
	})
}

// TestSharedDeadlineNeverRunThrough: for random sessions on one key, each
// prompting at a random time against a stand-in that answers 429 with a
// random retry-after for a random while, no request starts after a 429's
// answer and before the deadline its hint set (docs/policy.md §9.11).
func TestSharedDeadlineNeverRunThrough(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rapid.SyncTest(t, func(t *rapid.T) {
			hint := rapid.IntRange(1, 5).Draw(t, "hint")
			a := &standIn{start: time.Now(), window: time.Duration(rapid.IntRange(0, 8000).Draw(t, "windowMs")) * time.Millisecond,
				latency: time.Duration(rapid.IntRange(1, 300).Draw(t, "latencyMs")) * time.Millisecond, hint: fmt.Sprint(hint)}
			cfg := policy.DefaultConfig()
			cfg.Retry.BaseDelayMs = int64(rapid.IntRange(1, 3000).Draw(t, "baseDelayMs"))
			cfg.Retry.HonorRetryAfter = rapid.Bool().Draw(t, "honor")
			cfg.Retry.MaxRetries = 20
			l, err := limiter.New(limiter.Config{FailureThreshold: -1})
			if err != nil {
				t.Fatal(err)
			}
			n := rapid.IntRange(1, 8).Draw(t, "sessions")
			var wg sync.WaitGroup
			for i := range n {
				s, err := session.New(a, session.WithConfig(cfg), session.WithModel(scripted.DefaultModel), session.WithLimiter(l))
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				at := time.Duration(rapid.IntRange(0, 5000).Draw(t, fmt.Sprint("startMs", i))) * time.Millisecond
				wg.Go(func() {
					time.Sleep(at)
					_ = s.Prompt(context.Background(), "hi")
				})
			}
			wg.Wait()
			deadline := time.Duration(hint) * time.Second
			for _, r := range a.limited {
				for _, c := range a.calls {
					if c.After(r) && c.Before(r.Add(deadline)) {
						t.Fatalf("a request at %v ran through the deadline %v a 429 answered at %v set", c.Sub(a.start), r.Add(deadline).Sub(a.start), r.Sub(a.start))
					}
				}
			}
		})
	})
}

// panickingLimiter panics in both of its methods.
type panickingLimiter struct{}

func (panickingLimiter) Admit(string, string) (time.Time, string, string) { panic("admit exploded") }
func (panickingLimiter) Done(string, string, *transcript.Message)         { panic("done exploded") }

// heldForEver holds every run for an hour, with a key and reason that are
// not UTF-8.
type heldForEver struct{}

func (heldForEver) Admit(string, string) (time.Time, string, string) {
	return time.Now().Add(time.Hour), "key\xff", "why\xfe"
}
func (heldForEver) Done(string, string, *transcript.Message) {}

// TestHostileLimiters: a limiter that panics is logged and admits the run;
// one that holds every run for ever is waited on until Abort, which
// returns at once; text that is not UTF-8 is cleaned.
func TestHostileLimiters(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var buf safeBuffer
		s, _, _ := newSession(t, []scripted.Call{ok("fine")}, session.WithLimiter(panickingLimiter{}),
			session.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		s.Flush()
		assert.Contains(t, buf.String(), "in=limiter panic=\"admit exploded\"")
		assert.Contains(t, buf.String(), "in=limiter panic=\"done exploded\"")
	})
	bubble(t, func(t *testing.T) {
		s, agent, rec := newSession(t, []scripted.Call{ok("never")}, session.WithLimiter(heldForEver{}))
		done := promptAsync(s, "hi")
		time.Sleep(3 * time.Hour)
		synctest.Wait()
		st := s.Status()
		assert.Equal(t, states.Backoff, st.State)
		assert.Equal(t, "key\uFFFD", st.SharedLimitKey)
		assert.Equal(t, "why\uFFFD", st.SharedLimitReason)
		assert.Equal(t, 1, agent.Remaining(), "no call in three hours")
		assert.Equal(t, 4, count(rec.lines(), "shared_limit_wait"), "asked again at each deadline")
		start := time.Now()
		s.Abort()
		require.ErrorIs(t, <-done, policy.ErrAborted)
		assert.Zero(t, time.Since(start))
		assert.Equal(t, states.Idle, s.Status().State)
	})
}

// safeBuffer is a bytes.Buffer safe for concurrent use.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFailedAppendReportedBeforeTheHeldRun: a prompt whose run the shared
// limit holds and whose message the history fails to append asks two
// answers of the engine at once; the append's failure is reported first,
// as the answer to the input that made it, so that the engine counts the
// entries the history has: its snapshot restores on that history.
func TestFailedAppendReportedBeforeTheHeldRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := &failingHistory{fail: map[int]bool{1: true}}
		s, _, _ := newSession(t, []scripted.Call{ok("fine")}, session.WithLimiter(&heldOnce{}), session.WithHistory(h))
		err := s.Prompt(context.Background(), "hi")
		require.ErrorIs(t, err, policy.ErrHistory)
		snap, err := s.Snapshot()
		require.NoError(t, err)
		assert.Equal(t, len(readAll(t, h)), snap.History, "the entries the snapshot counts")
		again, err := session.New(scripted.New(scripted.Script{Model: scripted.DefaultModel}), session.WithModel(scripted.DefaultModel), session.WithHistory(h), session.WithSnapshot(snap))
		require.NoError(t, err, "the session's own snapshot, on its own history")
		require.NoError(t, again.Close())
	})
}

// heldOnce holds the first run for a minute, and admits the rest.
type heldOnce struct{ held atomic.Bool }

func (l *heldOnce) Admit(string, string) (time.Time, string, string) {
	if l.held.Swap(true) {
		return time.Time{}, "", ""
	}
	return time.Now().Add(time.Minute), "key", "busy"
}
func (*heldOnce) Done(string, string, *transcript.Message) {}
