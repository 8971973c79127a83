package session_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// readAll collects h's entries, failing the test on an error.
func readAll(t require.TestingT, h history.History) []transcript.Entry {
	var out []transcript.Entry
	for e, err := range h.Entries() {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

// recorder keeps every event a session emits, with the fake time it
// arrived at.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	evs   []events.Event
	at    []time.Duration
}

func record(s *session.Session) *recorder {
	r := &recorder{start: time.Now()}
	s.Subscribe(func(ev events.Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.evs = append(r.evs, ev)
		r.at = append(r.at, time.Since(r.start))
	})
	return r
}

// events returns what was recorded, after letting every delivery finish.
func (r *recorder) events() []events.Event {
	synctest.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]events.Event(nil), r.evs...)
}

// lines describes the recorded events, one string each, leaving out the
// agent's bookkeeping (turn_start, turn_end, message_start).
func (r *recorder) lines() []string {
	var out []string
	for _, ev := range r.events() {
		if d := describe(ev); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// recovery is lines without the agent's own events and the state changes:
// only the auto_retry_* and auto_compaction_* events.
func (r *recorder) recovery() []string {
	var out []string
	for _, l := range r.lines() {
		if strings.HasPrefix(l, "retry_") || strings.HasPrefix(l, "compaction_") {
			out = append(out, l)
		}
	}
	return out
}

// timesOf returns when each event described as prefix arrived.
func (r *recorder) timesOf(prefix string) []time.Duration {
	synctest.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for i, ev := range r.evs {
		if strings.HasPrefix(describe(ev), prefix) {
			out = append(out, r.at[i])
		}
	}
	return out
}

// timeOf returns when the first event described as prefix arrived.
func (r *recorder) timeOf(prefix string) time.Duration {
	synctest.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, ev := range r.evs {
		if strings.HasPrefix(describe(ev), prefix) {
			return r.at[i]
		}
	}
	return -1
}

func describe(ev events.Event) string {
	switch e := ev.(type) {
	case events.AgentStart:
		return "agent_start"
	case events.AgentEnd:
		return "agent_end"
	case events.MessageEnd:
		m := e.Message
		switch {
		case m.Role != transcript.RoleAssistant:
			return fmt.Sprintf("message %s", m.Role)
		case m.ErrorMessage != "" && m.StopReason == "error":
			return fmt.Sprintf("message %s %q", m.StopReason, m.ErrorMessage)
		default:
			return fmt.Sprintf("message %s", m.StopReason)
		}
	case events.AutoRetryStart:
		return fmt.Sprintf("retry_start %d/%d %dms %q", e.Attempt, e.MaxAttempts, e.DelayMs, e.ErrorMessage)
	case events.AutoRetryEnd:
		if e.Success {
			return fmt.Sprintf("retry_end ok %d", e.Attempt)
		}
		return fmt.Sprintf("retry_end fail %d %q", e.Attempt, e.FinalError)
	case events.AutoCompactionStart:
		return "compaction_start " + string(e.Reason)
	case events.AutoCompactionEnd:
		switch {
		case e.Aborted:
			return "compaction_end aborted"
		case e.Result != nil:
			return fmt.Sprintf("compaction_end ok willRetry=%v", e.WillRetry)
		case e.ErrorMessage != "":
			return fmt.Sprintf("compaction_end failed %q", e.ErrorMessage)
		}
		return "compaction_end nothing"
	case events.StateChange:
		return fmt.Sprintf("%s>%s %s", e.From, e.To, e.Trigger)
	case events.EventsDropped:
		return fmt.Sprintf("dropped %d", e.Count)
	case events.SharedLimitWait:
		return fmt.Sprintf("shared_limit_wait %s %s %s", e.Key, e.Reason, e.Until.Format("15:04:05.000"))
	}
	return ""
}

// Script helpers.
func fail(text string) scripted.Call {
	return scripted.Call{StopReason: "error", ErrorMessage: text}
}

func ok(text string) scripted.Call { return scripted.Call{StopReason: "stop", Text: text} }

func toolUse(text string) scripted.Call { return scripted.Call{StopReason: "toolUse", Text: text} }

func slow(c scripted.Call, ms int64) scripted.Call { c.LatencyMs = ms; return c }

// newSession starts a session on a scripted agent playing calls, with the
// scripted model and options, and closes it when the test ends.
func newSession(t *testing.T, calls []scripted.Call, opts ...session.Option) (*session.Session, *scripted.Agent, *recorder) {
	t.Helper()
	agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: calls})
	opts = append([]session.Option{session.WithModel(scripted.DefaultModel), session.WithSessionID("test-session")}, opts...)
	s, err := session.New(agent, opts...)
	if err != nil {
		t.Fatal(err)
	}
	rec := record(s)
	t.Cleanup(func() { s.Close() })
	return s, agent, rec
}

// promptAsync starts a Prompt and returns a channel with its result.
func promptAsync(s *session.Session, text string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.Prompt(context.Background(), text) }()
	return done
}

// bubble runs f in a synctest bubble.
func bubble(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	synctest.Test(t, f)
}

const service503 = "503 Service Unavailable"
