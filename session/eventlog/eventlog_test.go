package eventlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/eventlog"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sink is a JSON log without times, safe for the subscriber's goroutine.
type sink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *sink) String() string {
	synctest.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// logger logs to a new sink at level, without times.
func logger(level slog.Level) (*slog.Logger, *sink) {
	out := &sink{}
	h := slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}})
	return slog.New(h), out
}

// lines are the log's lines with the attributes that tell a line apart,
// "LEVEL msg key=value ...", leaving out message details (which the test
// of content checks) to keep the expectations short.
func lines(t *testing.T, out *sink) []string {
	t.Helper()
	var got []string
	for line := range strings.Lines(out.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		require.Equal(t, "s1", rec[eventlog.KeySession], "every line names the session")
		s := fmt.Sprintf("%s %s", rec["level"], rec["msg"])
		var keys []string
		for k := range rec {
			switch k {
			case "level", "msg", eventlog.KeySession, eventlog.KeyMessageID, eventlog.KeyInput, eventlog.KeyOutput, eventlog.KeyProvider, eventlog.KeyModel:
			default:
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			s += fmt.Sprintf(" %s=%v", k, rec[k])
		}
		got = append(got, s)
	}
	return got
}

func fail(text string) scripted.Call { return scripted.Call{StopReason: "error", ErrorMessage: text} }
func ok(text string) scripted.Call   { return scripted.Call{StopReason: "stop", Text: text} }

func newSession(t *testing.T, calls []scripted.Call, opts ...session.Option) *session.Session {
	t.Helper()
	agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: calls})
	s, err := session.New(agent, append([]session.Option{session.WithModel(scripted.DefaultModel), session.WithSessionID("s1")}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestTransientChain: every event is a line named by its wire type, at its
// level: state changes and the agent's events debug, the retry a warning
// with its class, provider, model and delay, the recovery info. Issue
// item 1.
func TestTransientChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, out := logger(slog.LevelDebug)
		s := newSession(t, []scripted.Call{fail("503 Service Unavailable"), ok("done")})
		eventlog.Subscribe(s, l)
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Equal(t, []string{
			"DEBUG agent_start",
			"DEBUG turn_start",
			"DEBUG message_start message.role=assistant",
			"DEBUG message_end error.message=503 Service Unavailable message.role=assistant message.stop_reason=error",
			"DEBUG turn_end",
			"DEBUG agent_end messages=1",
			"DEBUG state_change state.event=agent_end state.from=idle state.to=classifying",
			"WARN auto_retry_start error.class=retryable error.message=503 Service Unavailable retry.attempt=1 retry.delay=2e+09 retry.max_attempts=3",
			"DEBUG state_change state.event=retry state.from=classifying state.to=backoff",
			"DEBUG state_change state.event=elapsed state.from=backoff state.to=continuing",
			"DEBUG agent_start",
			"DEBUG turn_start",
			"DEBUG message_start message.role=assistant",
			"DEBUG message_end message.role=assistant message.stop_reason=stop",
			"INFO auto_retry_end retry.attempt=1 retry.outcome=recovered",
			"DEBUG turn_end",
			"DEBUG agent_end messages=1",
			"DEBUG state_change state.event=agent_end state.from=continuing state.to=classifying",
			"DEBUG state_change state.event=accept state.from=classifying state.to=idle",
			"INFO turn_settled turn.outcome=success",
		}, lines(t, out))
		assert.Contains(t, out.String(), `"provider":"scripted","model":"scripted-1"`, "the retry names the provider and model")
	})
}

// TestExhaustedChainAtWarn: at level warn an exhausted chain is its
// retries, then the chain's end and the turn's failure as errors.
func TestExhaustedChainAtWarn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, out := logger(slog.LevelWarn)
		s := newSession(t, []scripted.Call{fail("503"), fail("503"), fail("503"), fail("503")})
		eventlog.Subscribe(s, l)
		require.ErrorIs(t, s.Prompt(context.Background(), "hi"), policy.ErrExhausted)
		assert.Equal(t, []string{
			"WARN auto_retry_start error.class=retryable error.message=503 retry.attempt=1 retry.delay=2e+09 retry.max_attempts=3",
			"WARN auto_retry_start error.class=retryable error.message=503 retry.attempt=2 retry.delay=4e+09 retry.max_attempts=3",
			"WARN auto_retry_start error.class=retryable error.message=503 retry.attempt=3 retry.delay=8e+09 retry.max_attempts=3",
			"ERROR auto_retry_end error.class=retryable error.message=503 retry.attempt=3 retry.outcome=exhausted",
			"ERROR turn_settled error.code=exhausted error.message=policy: retries exhausted after 3 attempts: 503 turn.outcome=failed",
		}, lines(t, out))
	})
}

// TestAbortedWait: a retry cancelled during its wait is the user's doing:
// info, not an error.
func TestAbortedWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, out := logger(slog.LevelInfo)
		s := newSession(t, []scripted.Call{fail("503"), ok("never")})
		eventlog.Subscribe(s, l)
		settled, err := s.Send("hi")
		require.NoError(t, err)
		synctest.Wait()
		s.AbortRetry()
		require.ErrorIs(t, <-settled, policy.ErrRetryCancelled)
		assert.Equal(t, []string{
			"INFO auto_retry_end error.message=Retry cancelled retry.attempt=1 retry.outcome=cancelled",
			"INFO turn_settled error.code=retry_cancelled error.message=policy: retry cancelled turn.outcome=failed",
		}, slices.DeleteFunc(lines(t, out), func(l string) bool { return strings.HasPrefix(l, "WARN") }))
	})
}

// TestOverflowRecovery: the compaction's end names its reason and outcome.
func TestOverflowRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.DefaultConfig()
		cfg.Compaction.KeepRecentTokens = 5
		l, out := logger(slog.LevelInfo)
		s := newSession(t, []scripted.Call{ok("first answer"), fail("prompt is too long: 213462 tokens > 200000 maximum"), ok("recovered")},
			session.WithConfig(cfg))
		require.NoError(t, s.Prompt(context.Background(), "first question, long enough to matter"))
		eventlog.Subscribe(s, l)
		require.NoError(t, s.Prompt(context.Background(), "second question"))
		got := lines(t, out)
		require.Len(t, got, 3)
		assert.Equal(t, "INFO auto_compaction_start compaction.reason=overflow", got[0])
		assert.Regexp(t, `^INFO auto_compaction_end compaction.outcome=compacted compaction.reason=overflow compaction.tokens_before=\d+ compaction.will_retry=true$`, got[1])
		assert.Equal(t, "INFO turn_settled turn.outcome=success", got[2])
	})
}

// TestNoContentUnlessAsked: without WithContent no line carries the text of
// a message, a delta or a summary, and never a credential's secret; with
// it, the texts are there.
func TestNoContentUnlessAsked(t *testing.T) {
	for _, content := range []bool{false, true} {
		t.Run(fmt.Sprint("content=", content), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := policy.DefaultConfig()
				cfg.Compaction.KeepRecentTokens = 5
				store, err := credentials.NewMemoryCredentials(nil, policy.Credential{ID: "team-a", Provider: "scripted", Type: "api_key", Secret: "env:HUSH_KEY"})
				if err != nil {
					t.Fatal(err)
				}
				l, out := logger(eventlog.LevelTrace)
				s := newSession(t, []scripted.Call{
					ok("the first answer, secret-answer-one"),
					fail("usage limit reached"),
					// A count that leaves the summary room for the prompt
					// (docs/session.md, "Calibration").
					fail("prompt is too long: 1000 tokens > 900 maximum"),
					ok("secret-answer-two"),
				}, session.WithConfig(cfg), session.WithCredentials(store))
				var opts []eventlog.Option
				if content {
					opts = append(opts, eventlog.WithContent())
				}
				eventlog.Subscribe(s, l, opts...)
				require.NoError(t, s.Prompt(context.Background(), "secret-prompt-one, long enough to matter"))
				require.NoError(t, s.Prompt(context.Background(), "secret-prompt-two"))
				log := out.String()
				assert.NotContains(t, log, "HUSH_KEY")
				assert.Contains(t, log, `"credential.id":"team-a"`)
				assert.Contains(t, log, `"error.class":"usage_limit"`)
				assert.Contains(t, log, `"msg":"auto_retry_end","session.id":"s1","retry.attempt":1,"retry.outcome":"failed","error.class":"overflow"`)
				assert.Contains(t, log, `{"level":"WARN","msg":"auto_retry_end"`, "a chain that an overflow ended is a warning: the turn recovered")
				// The prompt reaches the log only in the compaction's
				// summary.
				for _, text := range []string{"secret-answer-one", "secret-answer-two", "Summary", "secret-prompt-one"} {
					if content {
						assert.Contains(t, log, text)
					} else {
						assert.NotContains(t, log, text)
					}
				}
				assert.NotContains(t, log, "secret-prompt-two", "the user's prompt is no event's")
			})
		})
	}
}

// TestUnsubscribe: no line after the subscription ends.
func TestUnsubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, out := logger(slog.LevelDebug)
		s := newSession(t, []scripted.Call{ok("a"), ok("b")})
		stop := eventlog.Subscribe(s, l)
		require.NoError(t, s.Prompt(context.Background(), "one"))
		s.Flush()
		stop()
		n := len(lines(t, out))
		require.NoError(t, s.Prompt(context.Background(), "two"))
		assert.Len(t, lines(t, out), n)
	})
}

// TestNilLoggerIsTheDefault: a nil logger, or the zero slog.Logger (which
// has no handler), logs to slog.Default() instead of panicking.
func TestNilLoggerIsTheDefault(t *testing.T) {
	for _, c := range []struct {
		name string
		l    *slog.Logger
	}{{"nil", nil}, {"zero", &slog.Logger{}}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, out := logger(slog.LevelInfo)
				prev := slog.Default()
				slog.SetDefault(l)
				defer slog.SetDefault(prev)
				s := newSession(t, []scripted.Call{ok("a")})
				defer eventlog.Subscribe(s, c.l)()
				require.NoError(t, s.Prompt(context.Background(), "one"))
				assert.Equal(t, []string{"INFO turn_settled turn.outcome=success"}, lines(t, out))
			})
		})
	}
}

// streamer is an agent whose answer streams in two fragments.
type streamer struct{}

func (streamer) Run(_ context.Context, req session.RunRequest, emit func(events.Event)) error {
	m := transcript.Message{ID: "a1", Role: transcript.RoleAssistant, StopReason: "stop", Content: transcript.TextContent("Hello")}
	emit(events.AgentStart{})
	emit(events.MessageStart{Message: transcript.Message{ID: "a1", Role: transcript.RoleAssistant}})
	emit(events.MessageUpdate{Delta: events.Delta{Kind: "text", Text: "Hel"}})
	emit(events.MessageUpdate{Delta: events.Delta{Kind: "text", Text: "lo"}})
	emit(events.MessageEnd{Message: m})
	emit(events.AgentEnd{Messages: []transcript.Message{m}})
	return nil
}

// TestDeltasAtTraceLevel: a streamed fragment is a trace line, below
// debug, with its text only when content is asked for.
func TestDeltasAtTraceLevel(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, eventlog.LevelTrace} {
		for _, content := range []bool{false, true} {
			synctest.Test(t, func(t *testing.T) {
				l, out := logger(level)
				s, err := session.New(streamer{}, session.WithSessionID("s1"))
				require.NoError(t, err)
				defer s.Close()
				var opts []eventlog.Option
				if content {
					opts = append(opts, eventlog.WithContent())
				}
				defer eventlog.Subscribe(s, l, opts...)()
				require.NoError(t, s.Prompt(context.Background(), "hi"))
				var deltas []string
				for _, line := range lines(t, out) {
					if strings.Contains(line, "message_update") {
						deltas = append(deltas, line)
					}
				}
				switch {
				case level == slog.LevelDebug:
					assert.Empty(t, deltas, "debug leaves the fragments out")
				case content:
					assert.Equal(t, []string{"DEBUG-4 message_update delta.index=0 delta.kind=text delta.text=Hel", "DEBUG-4 message_update delta.index=0 delta.kind=text delta.text=lo"}, deltas)
				default:
					assert.Equal(t, []string{"DEBUG-4 message_update delta.index=0 delta.kind=text", "DEBUG-4 message_update delta.index=0 delta.kind=text"}, deltas)
				}
			})
		}
	}
}

// TestModelFallback: a switch to a fallback model is a warning naming both
// models, why and until when (issue 25 §1); its revert is info.
func TestModelFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, out := logger(slog.LevelInfo)
		cfg := policy.DefaultConfig()
		cfg.Fallback = &policy.FallbackConfig{Models: []policy.FallbackModel{{ID: "scripted-2"}}, After: "overloaded", CooldownMs: 1000}
		s := newSession(t, []scripted.Call{fail("529 overloaded_error: Overloaded"), ok("fine"), ok("again")}, session.WithConfig(cfg))
		eventlog.Subscribe(s, l)
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		time.Sleep(time.Second)
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		got := lines(t, out)
		assert.Contains(t, got, "WARN model_fallback fallback.from=scripted-1 fallback.reason=overloaded fallback.to=scripted-2 fallback.until=2000-01-01T00:00:01Z")
		assert.Contains(t, got, "INFO model_revert fallback.from=scripted-2 fallback.to=scripted-1")
	})
}
