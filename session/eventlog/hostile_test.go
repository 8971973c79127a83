package eventlog_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/eventlog"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// brokenHandler is a slog.Handler that misbehaves on every line: it
// panics with a value, with nil, or calls runtime.Goexit. It counts the
// lines it was given.
type brokenHandler struct {
	how   string
	mu    sync.Mutex
	lines int
}

func (h *brokenHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *brokenHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *brokenHandler) WithGroup(string) slog.Handler            { return h }
func (h *brokenHandler) Handle(context.Context, slog.Record) error {
	h.mu.Lock()
	h.lines++
	h.mu.Unlock()
	switch h.how {
	case "panic":
		panic("handler broke")
	case "panic nil":
		panic(nil)
	default:
		runtime.Goexit()
	}
	return nil
}

// TestBrokenHandlerLosesOnlyItsLines: the event log and the session's own
// logger share a handler that panics, or ends its goroutine, on every
// line. The event log's subscriber panics (or exits) on every event, the
// session recovers it and logs that through the same handler: every line
// is lost, but every event still reaches the log, the session's turns
// work, and Close returns. Each way to misbehave runs in a child process,
// so that a regression fails this test rather than the whole test binary.
func TestBrokenHandlerLosesOnlyItsLines(t *testing.T) {
	for _, how := range []string{"panic", "panic nil", "goexit"} {
		t.Run(how, func(t *testing.T) {
			if os.Getenv("AGENTFSM_ATTACK_CHILD") != "1" {
				cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenHandlerLosesOnlyItsLines$/^"+map[string]string{"panic": "panic", "panic nil": "panic_nil", "goexit": "goexit"}[how]+"$", "-test.count=1", "-test.v")
				cmd.Env = append(os.Environ(), "AGENTFSM_ATTACK_CHILD=1")
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "a broken handler must not kill the process nor stop the session; child said:\n%.2000s", out)
				assert.Contains(t, string(out), "--- PASS: "+t.Name(), "the child ran the scenario")
				return
			}
			synctest.Test(t, func(t *testing.T) {
				h := &brokenHandler{how: how}
				l := slog.New(h)
				agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{
					{StopReason: "stop", Text: "one"}, {StopReason: "stop", Text: "two"},
				}})
				s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithLogger(l))
				require.NoError(t, err)
				var mu sync.Mutex
				count := 0
				s.Subscribe(func(events.Event) { mu.Lock(); count++; mu.Unlock() })
				defer eventlog.Subscribe(s, l)()
				require.NoError(t, s.Prompt(context.Background(), "hi"))
				require.NoError(t, s.Prompt(context.Background(), "again"))
				s.Flush()
				require.NoError(t, s.Close())
				mu.Lock()
				defer mu.Unlock()
				h.mu.Lock()
				defer h.mu.Unlock()
				assert.Equal(t, 2*count, h.lines, "every event reached the log, and its failure the session's logger")
			})
		})
	}
}
