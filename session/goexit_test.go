package session_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// TestSubscriberGoexitKeepsDelivering: a subscriber that ends its goroutine
// with runtime.Goexit (t.FailNow from a subscriber does) is a panic that
// cannot be recovered; its later events are still delivered, in order, and
// Flush and Close return, instead of waiting for ever on a delivery
// goroutine that no longer exists.
func TestSubscriberGoexitKeepsDelivering(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var log syncBuffer
		s, _, _ := newSession(t, []scripted.Call{ok("one"), ok("two")},
			session.WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{ReplaceAttr: dropTime}))))
		var mu sync.Mutex
		var got []string
		s.Subscribe(func(ev events.Event) {
			mu.Lock()
			got = append(got, eventName(ev))
			mu.Unlock()
			switch ev.(type) {
			case events.AgentStart, events.TurnSettled:
				runtime.Goexit()
			}
		})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		s.Flush()
		require.NoError(t, s.Prompt(context.Background(), "again"))
		s.Flush()
		mu.Lock()
		turn := append([]string(nil), got...)
		mu.Unlock()
		require.NotEmpty(t, turn)
		half := len(turn) / 2
		assert.Equal(t, turn[:half], turn[half:], "both turns delivered whole, in order")
		assert.Equal(t, "TurnSettled", turn[len(turn)-1])
		assert.Equal(t, strings.Repeat(`level=ERROR msg="session: a subscriber panicked" event=AgentStart panic="runtime.Goexit was called"`+"\n"+
			`level=ERROR msg="session: a subscriber panicked" event=TurnSettled panic="runtime.Goexit was called"`+"\n", 2), log.String(), "each Goexit is logged")
		require.NoError(t, s.Close())
	})
}

// eventName is ev's Go type name.
func eventName(ev events.Event) string {
	switch ev.(type) {
	case events.AgentStart:
		return "AgentStart"
	case events.AgentEnd:
		return "AgentEnd"
	case events.TurnSettled:
		return "TurnSettled"
	case events.MessageStart:
		return "MessageStart"
	case events.MessageEnd:
		return "MessageEnd"
	case events.MessageUpdate:
		return "MessageUpdate"
	case events.StateChange:
		return "StateChange"
	}
	return "other"
}

// TestAgentGoexitFailsTheRun: an agent whose Run ends its goroutine with
// runtime.Goexit never returns, and cannot be recovered; the run fails as
// a panicking one does, and the session goes on, instead of waiting for
// ever for the run's end.
func TestAgentGoexitFailsTheRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := playing(func(_ context.Context, _ session.RunRequest, emit func(events.Event)) error {
			emit(events.AgentStart{})
			runtime.Goexit()
			return nil
		})
		s, _ := newSessionOn(t, agent)
		err := s.Prompt(context.Background(), "hi")
		require.ErrorIs(t, err, policy.ErrProvider)
		assert.ErrorContains(t, err, "the agent panicked: runtime.Goexit was called")
		require.NoError(t, s.Prompt(context.Background(), "again"))
	})
}

// TestSummarizerGoexitFailsTheCompaction: a summarizer that ends its
// goroutine with runtime.Goexit fails the compaction as a panicking one
// does.
func TestSummarizerGoexitFailsTheCompaction(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sum := summarizerFunc(func(context.Context, policy.SummaryRequest) (policy.Summary, error) {
			runtime.Goexit()
			return policy.Summary{}, nil
		})
		s, _, _ := newSession(t, []scripted.Call{ok("first answer"), overflowCall(), ok("done")}, smallKeep(), session.WithSummarizer(sum))
		warmUp(t, s)
		err := s.Prompt(context.Background(), "second question, long enough to compact")
		require.ErrorIs(t, err, policy.ErrOverflow)
		assert.ErrorContains(t, err, "the summarizer panicked: runtime.Goexit was called")
		require.NoError(t, s.Prompt(context.Background(), "again"))
		_, err = s.Compact(context.Background(), "")
		assert.ErrorContains(t, err, "runtime.Goexit was called", "a manual compaction fails the same way")
	})
}

// TestPanickingRandomSourceIsRecovered: the random source (WithRandom) is
// embedder code the session calls on its own goroutine as a run ends; a
// panic there is recovered and logged, and the retry waits without jitter,
// instead of killing the process. The scenario runs in a child process, so
// that a regression fails this test rather than the whole test binary.
func TestPanickingRandomSourceIsRecovered(t *testing.T) {
	if os.Getenv("AGENTFSM_ATTACK_CHILD") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPanickingRandomSourceIsRecovered$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "AGENTFSM_ATTACK_CHILD=1")
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "a panicking random source must not kill the process; child said:\n%.1500s", out)
		assert.Contains(t, string(out), "--- PASS: TestPanickingRandomSourceIsRecovered", "the child ran the scenario")
		return
	}
	bubble(t, func(t *testing.T) {
		var log syncBuffer
		s, _, rec := newSession(t, []scripted.Call{fail(service503), ok("done")},
			session.WithRandom(func() float64 { panic("no entropy") }),
			session.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Equal(t, []string{`retry_start 1/3 2000ms "503 Service Unavailable"`, "retry_end ok 1"}, rec.recovery())
		assert.Contains(t, log.String(), "in=\"random source\" panic=\"no entropy\"")
	})
}
