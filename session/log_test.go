package session_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
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

// hostileHandler is a slog.Handler whose Handle misbehaves on every call:
// it panics with a value, panics with nil, or calls runtime.Goexit. It
// counts the calls.
type hostileHandler struct {
	how   string
	mu    sync.Mutex
	calls int
}

func (h *hostileHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *hostileHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *hostileHandler) WithGroup(string) slog.Handler            { return h }
func (h *hostileHandler) Handle(context.Context, slog.Record) error {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	switch h.how {
	case "panic":
		panic("handler broke")
	case "panic nil":
		panic(nil)
	case "goexit":
		runtime.Goexit()
	}
	return nil
}

func (h *hostileHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// TestHostileLogHandlerNeverEscapes: the session logs what it recovers
// (a subscriber's, an agent's, a summarizer's, an observer's or a
// credential store's panic) and its failed history writes, often from
// inside a recover. A handler that panics there, with a value or nil, or
// ends its goroutine with runtime.Goexit, must lose only its line: the
// session goes on, its next turn works, and the process lives. The
// scenarios run in a child process, so that a regression fails this test
// rather than the whole test binary: one child for each way to misbehave.
func TestHostileLogHandlerNeverEscapes(t *testing.T) {
	child := os.Getenv("AGENTFSM_ATTACK_CHILD") == "1"
	scenarios := []struct {
		name string
		run  func(t *testing.T, logger session.Option)
	}{
		{"subscriber", func(t *testing.T, logger session.Option) {
			s, _, _ := newSession(t, []scripted.Call{ok("one"), ok("two")}, logger)
			var mu sync.Mutex
			settled := 0
			s.Subscribe(func(ev events.Event) {
				if _, ok := ev.(events.TurnSettled); ok {
					mu.Lock()
					settled++
					mu.Unlock()
				}
				panic("subscriber broke")
			})
			require.NoError(t, s.Prompt(context.Background(), "hi"))
			require.NoError(t, s.Prompt(context.Background(), "again"))
			s.Flush()
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, 2, settled, "the subscriber keeps receiving")
		}},
		{"history", func(t *testing.T, logger session.Option) {
			h := &failingHistory{fail: map[int]bool{1: true}}
			s, _, _ := newSession(t, []scripted.Call{ok("one"), ok("two")}, logger, session.WithHistory(h))
			assert.ErrorIs(t, s.Prompt(context.Background(), "hi"), errDiskFull)
			require.NoError(t, s.Prompt(context.Background(), "again"))
		}},
		{"agent", func(t *testing.T, logger session.Option) {
			agent := playing(func(context.Context, session.RunRequest, func(events.Event)) error { panic("agent broke") })
			s, _ := newSessionOn(t, agent, logger)
			err := s.Prompt(context.Background(), "hi")
			require.ErrorIs(t, err, policy.ErrProvider)
			assert.ErrorContains(t, err, "the agent panicked: agent broke")
			require.NoError(t, s.Prompt(context.Background(), "again"))
		}},
		{"observer", func(t *testing.T, logger session.Option) {
			s, _, _ := newSession(t, []scripted.Call{ok("one"), ok("two")}, logger, session.WithObserver(panicObserver{}))
			require.NoError(t, s.Prompt(context.Background(), "hi"))
			require.NoError(t, s.Prompt(context.Background(), "again"))
		}},
		{"credential store", func(t *testing.T, logger session.Option) {
			s, _, _ := newSession(t, []scripted.Call{ok("one"), ok("two")}, logger, session.WithCredentials(panickingStore{}))
			require.NoError(t, s.Prompt(context.Background(), "hi"))
			require.NoError(t, s.Prompt(context.Background(), "again"))
		}},
		{"summarizer", func(t *testing.T, logger session.Option) {
			sum := summarizerFunc(func(context.Context, policy.SummaryRequest) (policy.Summary, error) { panic("summarizer broke") })
			s, _, _ := newSession(t, []scripted.Call{ok("first answer"), overflowCall(), ok("done")}, smallKeep(), session.WithSummarizer(sum), logger)
			warmUp(t, s)
			err := s.Prompt(context.Background(), "second question, long enough to compact")
			require.ErrorIs(t, err, policy.ErrOverflow)
			assert.ErrorContains(t, err, "the summarizer panicked: summarizer broke")
			require.NoError(t, s.Prompt(context.Background(), "again"))
		}},
	}
	for _, how := range []string{"panic", "panic nil", "goexit"} {
		t.Run(how, func(t *testing.T) {
			if !child {
				name := strings.ReplaceAll(t.Name(), " ", "_")
				cmd := exec.Command(os.Args[0], "-test.run=^"+strings.ReplaceAll(regexp.QuoteMeta(name), "/", "$/^")+"$", "-test.count=1", "-test.v")
				cmd.Env = append(os.Environ(), "AGENTFSM_ATTACK_CHILD=1")
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "a misbehaving log handler must not kill the process nor stop the session; child said:\n%.3000s", out)
				assert.Contains(t, string(out), "--- PASS: "+name+"/summarizer", "the child ran the scenarios")
				return
			}
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					bubble(t, func(t *testing.T) {
						h := &hostileHandler{how: how}
						sc.run(t, session.WithLogger(slog.New(h)))
						assert.Positive(t, h.count(), "the handler was called")
					})
				})
			}
		})
	}
}
