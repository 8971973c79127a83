package session_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// A subscriber that panics stops neither the session nor the others, and
// keeps receiving later events.
func TestPanickingSubscriber(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{fail(service503), ok("done")})
		var mu sync.Mutex
		seen := 0
		s.Subscribe(func(ev events.Event) {
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
		s.Subscribe(func(ev events.Event) {
			<-release
			mu.Lock()
			got = append(got, rpc.EventType(ev))
			mu.Unlock()
		})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		all := rec.events()
		require.NotEmpty(t, all)
		close(release)
		synctest.Wait()
		var want []string
		for _, ev := range all {
			want = append(want, rpc.EventType(ev))
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
		var got []events.Event
		s.Subscribe(func(ev events.Event) {
			if _, first := ev.(events.AgentStart); first {
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
			if d, isDrop := ev.(events.EventsDropped); isDrop {
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
		stop := s.Subscribe(func(events.Event) { mu.Lock(); n++; mu.Unlock() })
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

// TestPanickingSubscriberIsLogged: a subscriber's panic is logged with the
// event's type and the panic's value. Issue item 5.
func TestPanickingSubscriberIsLogged(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var log syncBuffer
		s, _, _ := newSession(t, []scripted.Call{ok("done")},
			session.WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{ReplaceAttr: dropTime}))))
		s.Subscribe(func(ev events.Event) {
			if _, ok := ev.(events.AgentStart); ok {
				panic("subscriber bug")
			}
		})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		s.Flush()
		assert.Equal(t, `level=ERROR msg="session: a subscriber panicked" event=AgentStart panic="subscriber bug"`+"\n", log.String())
	})
}

// dropTime leaves the time out of a log record.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
