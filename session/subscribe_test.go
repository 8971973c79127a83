package session_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// A subscriber that panics stops neither the session nor the others, and
// keeps receiving later events.
func TestPanickingSubscriber(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{fail(service503), ok("done")})
		var mu sync.Mutex
		seen := 0
		s.Subscribe(func(ev session.Event) {
			mu.Lock()
			seen++
			mu.Unlock()
			panic("subscriber bug")
		})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		all := rec.events()
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, len(all), seen, "every event reached the panicking subscriber too")
	})
}

// A subscriber that blocks holds up only itself: the turn completes, the
// other subscribers see everything, and the blocked one catches up in
// order once released.
func TestBlockingSubscriber(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{fail(service503), ok("done")})
		release := make(chan struct{})
		var mu sync.Mutex
		var got []string
		s.Subscribe(func(ev session.Event) {
			<-release
			mu.Lock()
			got = append(got, ev.Type())
			mu.Unlock()
		})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		all := rec.events()
		require.NotEmpty(t, all)
		close(release)
		synctest.Wait()
		var want []string
		for _, ev := range all {
			want = append(want, ev.Type())
		}
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, want, got)
	})
}

// A bounded subscriber that falls behind loses events and is told how many.
func TestBoundedSubscriberIsToldWhatItLost(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{ok("done")})
		release := make(chan struct{})
		var mu sync.Mutex
		var got []session.Event
		s.Subscribe(func(ev session.Event) {
			if _, first := ev.(session.AgentStart); first {
				<-release
			}
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
		}, session.WithBuffer(2))
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		total := len(rec.events())
		close(release)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		delivered, dropped, notices := 0, 0, 0
		for _, ev := range got {
			if d, isDrop := ev.(session.EventsDropped); isDrop {
				dropped += d.Count
				notices++
			} else {
				delivered++
			}
		}
		assert.Positive(t, notices, "the subscriber is told it lost events")
		assert.Equal(t, total, delivered+dropped, "delivered plus dropped is everything")
	})
}

func TestUnsubscribe(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, _ := newSession(t, []scripted.Call{ok("a"), ok("b")})
		var mu sync.Mutex
		n := 0
		stop := s.Subscribe(func(session.Event) { mu.Lock(); n++; mu.Unlock() })
		require.NoError(t, s.Prompt(context.Background(), "one"))
		synctest.Wait()
		mu.Lock()
		first := n
		mu.Unlock()
		stop()
		stop() // twice is fine
		require.NoError(t, s.Prompt(context.Background(), "two"))
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, first, n)
	})
}

func TestEventsMarshalAsSpecified(t *testing.T) {
	cases := []struct {
		ev   session.Event
		want string
	}{
		{session.AutoRetryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 2000, ErrorMessage: "503 Service Unavailable"},
			`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"503 Service Unavailable"}`},
		{session.AutoRetryEnd{Success: true, Attempt: 1}, `{"type":"auto_retry_end","success":true,"attempt":1}`},
		{session.AutoRetryEnd{Success: false, Attempt: 3, FinalError: "503 Service Unavailable"},
			`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"503 Service Unavailable"}`},
		{session.AutoCompactionStart{Reason: session.ReasonOverflow}, `{"type":"auto_compaction_start","reason":"overflow"}`},
		{session.AutoCompactionEnd{Result: &session.CompactionResult{Summary: "s", FirstKeptEntryID: "m-3", TokensBefore: 9}, WillRetry: true},
			`{"type":"auto_compaction_end","result":{"summary":"s","firstKeptEntryId":"m-3","tokensBefore":9},"aborted":false,"willRetry":true}`},
		{session.AutoCompactionEnd{ErrorMessage: "Auto-compaction failed: x"},
			`{"type":"auto_compaction_end","aborted":false,"willRetry":false,"errorMessage":"Auto-compaction failed: x"}`},
		{session.StateChange{From: "classifying", To: "backoff", Event: "retry"}, `{"type":"state_change","from":"classifying","to":"backoff","event":"retry"}`},
		{session.AgentStart{}, `{"type":"agent_start"}`},
		{session.TurnStart{}, `{"type":"turn_start"}`},
		{session.TurnEnd{}, `{"type":"turn_end"}`},
		{session.AgentEnd{}, `{"type":"agent_end","messages":[]}`},
		{session.MessageEnd{Message: session.Message{ID: "a", Role: "assistant", StopReason: "stop", Timestamp: 5}},
			`{"type":"message_end","message":{"id":"a","role":"assistant","stopReason":"stop","timestamp":5}}`},
		{session.EventsDropped{Count: 4}, `{"type":"events_dropped","count":4}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.ev)
		require.NoError(t, err)
		assert.JSONEq(t, c.want, string(b), c.ev.Type())
		assert.Regexp(t, `^\{"type":"`+c.ev.Type()+`"`, string(b), "type comes first")
	}
}
