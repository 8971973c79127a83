package session_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/states"
)

// Abort while a continuation's model call is in flight: the chain ends as
// cancelled and the counter resets (§11: abort during a retried run).
func TestAbortDuringContinuation(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{fail(service503), slow(ok("late"), 10_000)})
		done := promptAsync(s, "hi")
		time.Sleep(3 * time.Second) // 2 s wait, then 1 s into the continuation
		synctest.Wait()
		require.Equal(t, states.Continuing, s.Status().State)
		require.True(t, s.Status().Streaming)
		s.Abort()
		assert.False(t, s.Status().Streaming, "Abort returns when the session is quiet")
		require.ErrorIs(t, <-done, policy.ErrAborted)
		assert.Equal(t, 0, s.Status().Attempt)
		assert.Equal(t, states.Idle, s.Status().State)
		assert.Equal(t, []string{
			"agent_start",
			`message error "503 Service Unavailable"`,
			"agent_end",
			"idle>classifying agent_end",
			`retry_start 1/3 2000ms "503 Service Unavailable"`,
			"classifying>backoff retry",
			"backoff>continuing elapsed",
			"agent_start",
			`retry_end fail 1 "Retry cancelled"`,
			"continuing>cancelled cancel",
			"cancelled>idle reset",
			"message aborted",
			"agent_end",
		}, rec.lines())
	})
}

// A retried run that uses tools: the chain ends at the first success, and
// Prompt returns only after the last tool round (§11).
func TestRetriedRunWithTools(t *testing.T) {
	bubble(t, func(t *testing.T) {
		calls := []scripted.Call{fail(service503), slow(toolUse("read a file"), 100), slow(toolUse("edit it"), 100), slow(ok("done"), 100)}
		s, _, rec := newSession(t, calls)
		start := time.Now()
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Equal(t, 2300*time.Millisecond, time.Since(start), "the wait, then three calls of 100 ms")
		assert.Equal(t, []string{
			"agent_start",
			`message error "503 Service Unavailable"`,
			"agent_end",
			"idle>classifying agent_end",
			`retry_start 1/3 2000ms "503 Service Unavailable"`,
			"classifying>backoff retry",
			"backoff>continuing elapsed",
			"agent_start",
			"message toolUse",
			"retry_end ok 1",
			"message toolResult",
			"message toolUse",
			"message toolResult",
			"message stop",
			"agent_end",
			"continuing>classifying agent_end",
			"classifying>idle accept",
		}, rec.lines())
		assert.Equal(t, 2100*time.Millisecond, rec.timeOf("retry_end"))
	})
}

func TestPromptWhileBusy(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, _ := newSession(t, []scripted.Call{fail(service503), ok("done")})
		done := promptAsync(s, "hi")
		synctest.Wait()
		require.True(t, s.Status().Retrying, "the chain is active before anything a caller can race with")
		assert.ErrorIs(t, s.Prompt(context.Background(), "second"), policy.ErrBusy)
		require.NoError(t, <-done)
		require.NoError(t, s.Prompt(context.Background(), "now it is free"))
	})
}

// AbortRetry and Abort from many goroutines at once: one chain end, no
// panic, the session usable after.
func TestConcurrentAborts(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, agent, rec := newSession(t, []scripted.Call{fail(service503), ok("never reached")})
		done := promptAsync(s, "hi")
		time.Sleep(time.Second)
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					s.AbortRetry()
				} else {
					s.Abort()
				}
			}()
		}
		wg.Wait()
		err := <-done
		assert.True(t, errors.Is(err, policy.ErrRetryCancelled) || errors.Is(err, policy.ErrAborted), "%v", err)
		assert.Equal(t, []string{
			`retry_start 1/3 2000ms "503 Service Unavailable"`,
			`retry_end fail 1 "Retry cancelled"`,
		}, rec.recovery())
		assert.Equal(t, 1, agent.Remaining())
		require.NoError(t, s.Prompt(context.Background(), "again"))
	})
}

// AbortRetry with no wait pending does nothing.
func TestAbortRetryIdleDoesNothing(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{slow(ok("done"), 1000)})
		s.AbortRetry()
		done := promptAsync(s, "hi")
		time.Sleep(500 * time.Millisecond)
		s.AbortRetry() // a user's run in flight, no wait pending
		require.NoError(t, <-done)
		assert.Empty(t, rec.recovery())
		assert.Equal(t, []string{"agent_start", "message stop", "agent_end", "idle>classifying agent_end", "classifying>idle accept"}, rec.lines())
	})
}

// Abort of a user's run (no chain) aborts the call; the aborted run
// decides nothing.
func TestAbortUserRun(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{slow(ok("done"), 5000)})
		done := promptAsync(s, "hi")
		time.Sleep(time.Second)
		s.Abort()
		require.ErrorIs(t, <-done, policy.ErrAborted)
		assert.Equal(t, []string{"agent_start", "message aborted", "agent_end"}, rec.lines())
	})
}

// Prompt's context ending aborts the turn.
func TestPromptContextCancelled(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{fail(service503), ok("done")})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := s.Prompt(ctx, "hi")
		require.ErrorIs(t, err, policy.ErrAborted)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, []string{
			`retry_start 1/3 2000ms "503 Service Unavailable"`,
			`retry_end fail 1 "Retry cancelled"`,
		}, rec.recovery())
	})
}

// The failed message is removed from the runtime context by identity, and
// stays in history (§11).
func TestRemovedByIdentity(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, _ := newSession(t, []scripted.Call{fail(service503), ok("done")})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		var ids []string
		for _, m := range s.Messages() {
			ids = append(ids, m.ID)
		}
		assert.Equal(t, []string{"user-1", "call-2"}, ids)
		var hist []string
		for _, e := range readAll(t, s.History()) {
			hist = append(hist, string(e.Type)+" "+e.ID)
		}
		assert.Equal(t, []string{"message user-1", "message call-1", "removal call-1", "message call-2"}, hist)
	})
}

// After Prompt returns, nothing more is emitted until the next call, and
// the machine is idle with no timer (§9.7).
func TestQuietAfterPrompt(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{fail(service503), fail(service503), ok("done")})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		n := len(rec.lines())
		assert.Equal(t, states.Idle, s.Status().State)
		time.Sleep(time.Hour)
		assert.Len(t, rec.lines(), n)
	})
}
