package session_test

import (
	"context"
	"fmt"
	"runtime"
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

// seen is what one subscriber received, in order.
type seen struct {
	mu  sync.Mutex
	got []string
}

func (s *seen) add(ev events.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, eventText(ev))
}

func (s *seen) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

func eventText(ev events.Event) string {
	if d, ok := ev.(events.EventsDropped); ok {
		return fmt.Sprint("dropped ", d.Count)
	}
	line, err := rpc.MarshalEvent(ev)
	if err != nil {
		return fmt.Sprint(rpc.EventType(ev), " (no wire form)")
	}
	return string(line)
}

// Whichever subscriber the loop delivers to itself at the end of its queue
// (the first with something to deliver), and whatever it does there
// (calls back into the session through its value: Send, Flush, Status,
// Snapshot, Subscribe; panics; ends its goroutine with runtime.Goexit;
// blocks until another one is handed the turn's end; unsubscribes itself), every
// subscriber receives every event once, in the order emitted, a bounded
// one what its bound lets through with the count of the rest, and Flush
// waits for what was emitted before it.
func TestHostileSubscriberFirstInLine(t *testing.T) {
	const hostiles = 7
	for first := range hostiles {
		t.Run(fmt.Sprint(first), func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{
					fail(service503), ok("done"), fail(service503), ok("again"), ok("late"),
				}})
				s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithSessionID("test-session"))
				require.NoError(t, err)
				defer s.Close()

				var (
					plain, callback, goexit, panics, blocked, quitter, bounded, late seen
					again                                                            <-chan error
					againMu                                                          sync.Mutex
				)
				release := make(chan struct{}) // the blocked one waits for the first turn's end
				var releaseOnce sync.Once
				var quit func()
				quitAfter := 5
				subscribe := []func(){
					func() { s.Subscribe(plain.add) },
					func() {
						s.SubscribeSession(func(mine *session.Session, ev events.Event) {
							callback.add(ev)
							_ = mine.Status()
							if _, ok := ev.(events.TurnSettled); !ok {
								return
							}
							_, _ = mine.Snapshot()
							releaseOnce.Do(func() { close(release) })
							mine.Flush()
							againMu.Lock()
							defer againMu.Unlock()
							if again == nil {
								ch, err := mine.Send("again")
								assert.NoError(t, err)
								again = ch
								mine.Subscribe(late.add)
							}
						})
					},
					func() {
						s.Subscribe(func(ev events.Event) {
							goexit.add(ev)
							runtime.Goexit()
						})
					},
					func() {
						s.Subscribe(func(ev events.Event) {
							panics.add(ev)
							panic("subscriber bug")
						})
					},
					func() {
						s.Subscribe(func(ev events.Event) {
							blocked.add(ev)
							<-release
						})
					},
					func() {
						quit = s.Subscribe(func(ev events.Event) {
							quitter.add(ev)
							if len(quitter.list()) == quitAfter {
								quit()
							}
						})
					},
					func() { s.Subscribe(bounded.add, session.WithBuffer(2)) },
				}
				require.Len(t, subscribe, hostiles)
				for i := range subscribe {
					subscribe[(first+i)%len(subscribe)]()
				}
				rec := record(s)

				require.NoError(t, s.Prompt(context.Background(), "hi"))
				synctest.Wait()
				againMu.Lock()
				ch := again
				againMu.Unlock()
				require.NotNil(t, ch, "the subscriber sent its prompt")
				require.NoError(t, <-ch)
				s.Flush()
				all := rec.events()
				var want []string
				for _, ev := range all {
					want = append(want, eventText(ev))
				}
				require.NotEmpty(t, want)
				for name, got := range map[string]*seen{"plain": &plain, "callback": &callback, "goexit": &goexit, "panics": &panics, "blocked": &blocked} {
					assert.Equal(t, want, got.list(), "%s", name)
				}
				assert.Equal(t, want[:quitAfter], quitter.list(), "the subscriber that unsubscribed itself")
				// The late subscriber came in during a delivery: what it
				// received is the end of what was emitted.
				lateGot := late.list()
				require.NotEmpty(t, lateGot)
				assert.Equal(t, want[len(want)-len(lateGot):], lateGot, "the subscriber that came in late")
				// The bounded one: what it let through, in order, and the
				// count of the rest.
				next, dropped := 0, 0
				for _, ev := range bounded.list() {
					var n int
					if _, err := fmt.Sscanf(ev, "dropped %d", &n); err == nil {
						dropped += n
						continue
					}
					for next < len(want) && want[next] != ev {
						next++
					}
					require.Less(t, next, len(want), "the bounded subscriber received %s out of order", ev)
					next++
				}
				delivered := len(bounded.list())
				for _, ev := range bounded.list() {
					var n int
					if _, err := fmt.Sscanf(ev, "dropped %d", &n); err == nil {
						delivered--
					}
				}
				assert.Equal(t, len(want), delivered+dropped, "the bounded subscriber: %d delivered and %d counted dropped", delivered, dropped)
			})
		})
	}
}
