package session_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
)

// The tests of this file play an embedder's own parts (history, credential
// store, summarizer, subscribers, callers) misbehaving.

// TestHostileCompactWithDoneContextWhileBusyChangesNothing: Compact's doc
// says "While a run or a compaction is in flight it returns ErrBusy and
// changes nothing". A Compact whose context is already done, called while
// an automatic compaction runs, gets ErrBusy from the loop, but its select
// may also see ctx.Done and call AbortCompaction: it cancels the automatic
// compaction it said it left alone, and the turn fails with ErrOverflow.
func TestHostileCompactWithDoneContextWhileBusyChangesNothing(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := playing(answer(assistant("stop", "first answer")), answer(assistant("error", tooLong)))
		s, rec := newSessionOn(t, agent, smallKeep(), session.WithSummarizer(summarizerFunc(func(ctx context.Context, _ policy.SummaryRequest) (policy.Summary, error) {
			select {
			case <-time.After(time.Minute):
				return policy.Summary{Text: "summary"}, nil
			case <-ctx.Done():
				return policy.Summary{}, context.Cause(ctx)
			}
		})))
		warmUp(t, s)
		done := promptAsync(s, "second question, long enough to compact")
		synctest.Wait()
		require.Equal(t, states.Compacting, s.Status().State)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		// Each call has an even chance to take ctx.Done; 20 calls make a
		// pass by luck one in a million.
		for i := range 20 {
			_, err := s.Compact(ctx, "")
			require.ErrorIs(t, err, policy.ErrBusy)
			require.Equal(t, states.Compacting, s.Status().State, "call %d, busy, left the automatic compaction running", i+1)
		}
		assert.NoError(t, <-done, "the overflow recovery went on and the continuation succeeded")
		assert.NotContains(t, rec.recovery(), "compaction_end aborted")
	})
}

// TestHostileCompactWithDoneContextDoesNotCancelAnotherCompact: the same,
// with a manual compaction in flight: a second Compact is busy ("changes
// nothing"), yet it may cancel the first one.
func TestHostileCompactWithDoneContextDoesNotCancelAnotherCompact(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := playing(answer(assistant("stop", "first answer")), answer(assistant("stop", "second answer")))
		s, _ := newSessionOn(t, agent, smallKeep(), session.WithSummarizer(summarizerFunc(func(ctx context.Context, _ policy.SummaryRequest) (policy.Summary, error) {
			select {
			case <-time.After(time.Minute):
				return policy.Summary{Text: "summary"}, nil
			case <-ctx.Done():
				return policy.Summary{}, context.Cause(ctx)
			}
		})))
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second question"))
		first := make(chan error, 1)
		go func() {
			_, err := s.Compact(context.Background(), "")
			first <- err
		}()
		synctest.Wait()
		require.True(t, s.Status().Compacting)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for i := range 20 {
			_, err := s.Compact(ctx, "")
			require.ErrorIs(t, err, policy.ErrBusy)
			synctest.Wait()
			select {
			case err := <-first:
				t.Fatalf("call %d, busy, ended the first Compact: %v", i+1, err)
			default:
			}
		}
		assert.NoError(t, <-first, "the first Compact was not cancelled by the busy ones")
	})
}

// failingHistory is a MemoryHistory whose Append fails on the calls listed
// in fail (1-based).
type failingHistory struct {
	history.MemoryHistory
	mu    sync.Mutex
	calls int
	fail  map[int]bool
}

var errDiskFull = errors.New("disk full")

func (h *failingHistory) Append(es ...transcript.Entry) error {
	h.mu.Lock()
	h.calls++
	n := h.calls
	h.mu.Unlock()
	if h.fail[n] {
		return errDiskFull
	}
	return h.MemoryHistory.Append(es...)
}

var sentinels = []error{policy.ErrExhausted, policy.ErrRetryCancelled, policy.ErrAborted, policy.ErrOverflow,
	policy.ErrProvider, policy.ErrStartFailed, policy.ErrHistory, policy.ErrBusy, policy.ErrClosed}

// TestHostileHistoryFailureErrorMatchesASentinel: Prompt's doc: "It returns
// nil when the turn ended in a successful message, and otherwise an error
// matching one of ErrExhausted (an *ExhaustedError), ErrRetryCancelled,
// ErrAborted, ErrOverflow, ErrProvider, ErrStartFailed" (docs/session.md,
// Errors: "Otherwise its error matches (errors.Is)" the table). A history
// whose Append fails on the Nth call fails the turn ("When an append fails,
// the session logs it and fails the turn in flight") with the history's
// bare error, which matches none of them: a caller switching on the
// sentinels cannot tell what happened.
func TestHostileHistoryFailureErrorMatchesASentinel(t *testing.T) {
	for n := 1; n <= 6; n++ {
		t.Run(fmt.Sprintf("append %d fails", n), func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				h := &failingHistory{fail: map[int]bool{n: true}}
				// A turn with a retry: user, error, removal, answer.
				agent := playing(answer(assistant("error", service503)), answer(assistant("stop", "fine")))
				s, rec := newSessionOn(t, agent, session.WithHistory(h))
				err := s.Prompt(context.Background(), "hi")
				if err == nil {
					return // this append was not the turn's
				}
				matched := false
				for _, want := range sentinels {
					matched = matched || errors.Is(err, want)
				}
				assert.True(t, matched, "Prompt's error %q matches a documented sentinel", err)
				evs := rec.events()
				_, last := evs[len(evs)-1].(events.TurnSettled)
				assert.True(t, last)
				assert.Equal(t, states.Idle, s.Status().State)
			})
		})
	}
}

// panickingStore is a CredentialStore whose Current panics.
type panickingStore struct{}

func (panickingStore) Current(string, string) (policy.Credential, bool) { panic("store broke") }
func (panickingStore) MarkUsageLimitReached(string, string, time.Duration, string) bool {
	panic("store broke")
}

// TestHostileCredentialStorePanicIsRecovered: a CredentialStore is
// embedder code the session calls on its loop's goroutine (Current before a
// run, MarkUsageLimitReached after a usage limit); a panic in it is
// recovered and logged like one in an Agent or a Summarizer, and must not
// kill the process, with every other session in it. The test runs the
// scenario in a child process, so that a regression fails it rather than
// the whole test binary.
func TestHostileCredentialStorePanicIsRecovered(t *testing.T) {
	if os.Getenv("AGENTFSM_ATTACK_CHILD") == "1" {
		s, err := session.New(playing(), session.WithModel(policy.Model{Provider: "scripted", ID: "scripted-1"}),
			session.WithCredentials(panickingStore{}))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		err = s.Prompt(context.Background(), "hi")
		t.Logf("Prompt returned %v", err)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostileCredentialStorePanicIsRecovered$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "AGENTFSM_ATTACK_CHILD=1")
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "a panicking credential store must not kill the process; child said:\n%.600s", out)
	assert.Contains(t, string(out), "Prompt returned", "the child ran the scenario")
}

// TestHostileAgentEmitsAfterRunReturned: an agent that goes on emitting
// after Run returned, from several goroutines at once, while the next
// run (a retry) is in flight: its late events belong to no run and must
// change nothing (docs/session.md: "Once Abort ... nothing that run still
// reports decides anything"; Agent: events of a run that ended are not the
// next run's).
func TestHostileAgentEmitsAfterRunReturned(t *testing.T) {
	bubble(t, func(t *testing.T) {
		late := make(chan func(events.Event), 1)
		release := make(chan struct{})
		var wg sync.WaitGroup
		first := func(ctx context.Context, _ session.RunRequest, emit func(events.Event)) error {
			late <- emit
			m := assistant("error", service503)
			emit(events.AgentStart{})
			emit(events.MessageStart{Message: m})
			emit(events.MessageEnd{Message: m})
			emit(events.AgentEnd{})
			return nil
		}
		second := func(ctx context.Context, _ session.RunRequest, emit func(events.Event)) error {
			close(release)
			time.Sleep(time.Second)
			m := assistant("stop", "second answer")
			emit(events.AgentStart{})
			emit(events.MessageStart{Message: m})
			emit(events.MessageEnd{Message: m})
			emit(events.AgentEnd{})
			return nil
		}
		agent := playing(first, second)
		s, rec := newSessionOn(t, agent)
		done := promptAsync(s, "hi")
		stale := <-late
		for range 4 {
			wg.Go(func() {
				<-release
				bad := assistant("error", tooLong)
				stale(events.AgentStart{})
				stale(events.MessageStart{Message: bad})
				stale(events.MessageEnd{Message: bad})
				stale(events.AgentEnd{})
			})
		}
		require.NoError(t, <-done)
		wg.Wait()
		time.Sleep(time.Hour)
		assert.Equal(t, 2, agent.calls())
		for _, m := range s.Messages() {
			assert.NotEqual(t, tooLong, m.ErrorMessage, "a late message of an ended run is not in the context")
		}
		assert.Equal(t, []string{`retry_start 1/3 2000ms "503 Service Unavailable"`, "retry_end ok 1"}, rec.recovery())
		_ = s.Close()
		// And after Close: nothing panics.
		stale(events.AgentEnd{})
	})
}

// TestHostileSummarizerSucceedsAfterCancel: a summarizer that ignores its
// context and returns a success after AbortCompaction cancelled it: the
// compaction was aborted and nothing is applied (AbortCompaction cancels
// it; docs: ErrCompactionCancelled).
func TestHostileSummarizerSucceedsAfterCancel(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := playing(answer(assistant("stop", "first answer")), answer(assistant("stop", "second answer")))
		s, _ := newSessionOn(t, agent, smallKeep(), session.WithSummarizer(summarizerFunc(func(ctx context.Context, _ policy.SummaryRequest) (policy.Summary, error) {
			time.Sleep(time.Minute) // deaf to ctx
			return policy.Summary{Text: "late success"}, nil
		})))
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second question"))
		before := s.Messages()
		res := make(chan error, 1)
		go func() {
			_, err := s.Compact(context.Background(), "")
			res <- err
		}()
		synctest.Wait()
		s.AbortCompaction()
		assert.ErrorIs(t, <-res, policy.ErrCompactionCancelled)
		time.Sleep(2 * time.Minute)
		assert.Equal(t, before, s.Messages(), "the late success is not applied")
		for _, e := range readAll(t, s.History()) {
			assert.NotEqual(t, transcript.EntryCompaction, e.Type)
		}
	})
}

// TestHostilePromptFromTurnSettled: a subscriber starts the next turn from
// turn_settled, and closes the session from the second one's; every call
// returns (docs/session.md: "from that turn's TurnSettled it can").
func TestHostilePromptFromTurnSettled(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := playing(answer(assistant("error", service503)))
		s, _ := newSessionOn(t, agent)
		var mu sync.Mutex
		var results []error
		settled := 0
		s.SubscribeSession(func(s *session.Session, ev events.Event) {
			if _, ok := ev.(events.TurnSettled); !ok {
				return
			}
			mu.Lock()
			settled++
			n := settled
			mu.Unlock()
			switch n {
			case 1:
				err := s.Prompt(context.Background(), "from the subscriber")
				mu.Lock()
				results = append(results, err)
				mu.Unlock()
			case 2:
				_ = s.Close()
			}
		})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		time.Sleep(time.Hour)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []error{nil}, results)
		assert.ErrorIs(t, s.Prompt(context.Background(), "x"), policy.ErrClosed)
	})
}

// TestHostileAgentPanicAfterAgentEnd: an agent that ends its run with
// AgentEnd and then panics (in its cleanup). The Agent contract and
// docs/session.md say a run emits "AgentEnd last", and that the session
// keeps that bracket for agents that break it ("the session emits the
// AgentEnd an agent left out"). Here the session turns the panic into an
// error message that it reports after the run's agent_end, outside any
// agent_start/agent_end pair, and that AgentEnd.Messages never lists.
func TestHostileAgentPanicAfterAgentEnd(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := playing(func(ctx context.Context, _ session.RunRequest, emit func(events.Event)) error {
			answer(assistant("stop", "done"))(ctx, session.RunRequest{}, emit)
			panic("cleanup failed")
		})
		s, rec := newSessionOn(t, agent)
		_ = s.Prompt(context.Background(), "hi")
		open := false
		for _, ev := range rec.events() {
			switch ev.(type) {
			case events.AgentStart:
				open = true
			case events.AgentEnd:
				open = false
			case events.MessageStart, events.MessageEnd:
				assert.True(t, open, "%T %s outside agent_start…agent_end", ev, describe(ev))
			}
		}
	})
}

// TestHostileAbortDuringCheckBeforePrompt: Abort while the check before a
// prompt compacts: Abort returns quiet, the turn fails with ErrAborted,
// the user's prompt is never sent to the agent, and the session is usable.
func TestHostileAbortDuringCheckBeforePrompt(t *testing.T) {
	bubble(t, func(t *testing.T) {
		over := assistant("stop", "a long answer")
		over.Usage = usage(190_000)
		agent := playing(answer(assistant("stop", "first answer")), answer(over))
		var once sync.Once
		s, rec := newSessionOn(t, agent, smallKeep(), session.WithSummarizer(summarizerFunc(func(ctx context.Context, _ policy.SummaryRequest) (policy.Summary, error) {
			first := false
			once.Do(func() { first = true })
			if first {
				<-ctx.Done()
				return policy.Summary{}, context.Cause(ctx)
			}
			return policy.Summary{Text: "summary"}, nil
		})))
		warmUp(t, s)
		s.SetAutoCompactionEnabled(false)
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough"))
		s.SetAutoCompactionEnabled(true)
		done := promptAsync(s, "third question")
		synctest.Wait()
		require.Equal(t, states.Compacting, s.Status().State)
		s.Abort()
		assert.Equal(t, states.Idle, s.Status().State)
		require.ErrorIs(t, <-done, policy.ErrAborted)
		checkStopped(t, s, rec, agent, 2)
		for _, m := range s.Messages() {
			assert.NotEqual(t, "third question", m.Text(), "the prompt was not sent")
		}
		require.NoError(t, s.Prompt(context.Background(), "again"))
	})
}

// panickingHistory is a MemoryHistory whose Append panics on its first
// call.
type panickingHistory struct {
	history.MemoryHistory
	once sync.Once
}

func (h *panickingHistory) Append(es ...transcript.Entry) error {
	h.once.Do(func() { panic("history broke") })
	return h.MemoryHistory.Append(es...)
}

// TestHostileHistoryPanicIsRecovered: a History is embedder code the
// session calls on its loop's goroutine, like a CredentialStore; a panic
// in its Append is recovered, logged, and fails the write as an error
// would (the turn fails), instead of killing the process. The scenario
// runs in a child process, so that a regression fails this test rather
// than the whole test binary.
func TestHostileHistoryPanicIsRecovered(t *testing.T) {
	if os.Getenv("AGENTFSM_ATTACK_CHILD") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostileHistoryPanicIsRecovered$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "AGENTFSM_ATTACK_CHILD=1")
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "a panicking history must not kill the process; child said:\n%.1500s", out)
		assert.Contains(t, string(out), "--- PASS: TestHostileHistoryPanicIsRecovered", "the child ran the scenario")
		return
	}
	bubble(t, func(t *testing.T) {
		var log syncBuffer
		s, _, _ := newSession(t, []scripted.Call{ok("one"), ok("two")}, session.WithHistory(&panickingHistory{}),
			session.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		err := s.Prompt(context.Background(), "hi")
		assert.ErrorContains(t, err, "session: the history panicked: history broke")
		assert.Contains(t, log.String(), "history broke", "logged")
		require.NoError(t, s.Prompt(context.Background(), "again"))
	})
}
