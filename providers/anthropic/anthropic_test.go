package anthropic_test

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/internal/providertest"
	"github.com/agentfsm/agentfsm/providers/anthropic"
	"github.com/agentfsm/agentfsm/session"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	keyA = "sk-ant-api03-first-SECRET-aaaa"
	keyB = "sk-ant-api03-second-SECRET-bbbb"
)

// lookup is an environment holding the test's keys.
func lookup(name string) (string, bool) {
	v, ok := map[string]string{"ANTHROPIC_API_KEY": keyA, "KEY_A": keyA, "KEY_B": keyB}[name]
	return v, ok
}

func newAgent(srv *providertest.Server, tools ...anthropic.Tool) *anthropic.Agent {
	return anthropic.New(anthropic.Options{
		BaseURL:    srv.BaseURL(),
		HTTPClient: srv.Client(),
		Secrets:    session.EnvSecrets{Lookup: lookup},
		Tools:      tools,
	})
}

// fastConfig retries at once (in fake time, a millisecond).
func fastConfig() session.Config {
	cfg := session.DefaultConfig()
	cfg.Retry.BaseDelayMs = 1
	return cfg
}

// events records what a session emits.
type events struct {
	mu  sync.Mutex
	evs []session.Event
}

func watch(s *session.Session) *events {
	e := &events{}
	s.Subscribe(func(ev session.Event) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.evs = append(e.evs, ev)
	})
	return e
}

func (e *events) all() []session.Event {
	synctest.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]session.Event(nil), e.evs...)
}

// ends are the messages of the MessageEnd events.
func (e *events) ends() []session.Message {
	var out []session.Message
	for _, ev := range e.all() {
		if m, ok := ev.(session.MessageEnd); ok {
			out = append(out, m.Message)
		}
	}
	return out
}

func text(s string) providertest.Reply {
	return providertest.AnthropicMessage{
		Content: []providertest.AnthropicBlock{providertest.AnthropicText(s)},
		Usage:   providertest.AnthropicUsage{InputTokens: 120, OutputTokens: 8, CacheReadInputTokens: 40, CacheCreationInputTokens: 10},
	}.Reply()
}

func newSession(t *testing.T, a *anthropic.Agent, cfg session.Config, opts ...session.Option) *session.Session {
	t.Helper()
	s, err := session.New(a, append([]session.Option{session.WithConfig(cfg), session.WithModel(a.Model())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// lastText is the text of the session's last message.
func lastText(s *session.Session) string {
	ms := s.Messages()
	var b strings.Builder
	for _, blk := range ms[len(ms)-1].Content {
		b.WriteString(blk.Text)
	}
	return b.String()
}

// bodyMessages are the messages of a recorded request's body.
func bodyMessages(t *testing.T, r providertest.Request) []map[string]any {
	t.Helper()
	raw, err := json.Marshal(r.Body["messages"])
	require.NoError(t, err)
	var out []map[string]any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// Issue 13 item 2 (1): a 529 is retried once, and the turn succeeds.
func TestOverloadedThenSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		srv.Push(providertest.AnthropicOverloaded(), text("Hello there"))
		s := newSession(t, newAgent(srv), fastConfig())
		ev := watch(s)
		require.NoError(t, s.Prompt(t.Context(), "hi"))
		assert.Equal(t, "Hello there", lastText(s))

		reqs := srv.Settled()
		require.Len(t, reqs, 2)
		for _, r := range reqs {
			assert.True(t, r.Stream)
			assert.Equal(t, keyA, r.Key())
		}
		ends := ev.ends()
		require.Len(t, ends, 2)
		failed := ends[0]
		assert.Equal(t, classify.StopReasonError, failed.StopReason)
		assert.Equal(t, "529 overloaded_error: Overloaded", failed.ErrorMessage)
		assert.Equal(t, 529, failed.HTTPStatus)
		assert.Equal(t, "overloaded_error", failed.ErrorType)
		assert.True(t, strings.HasPrefix(failed.Headers["request-id"], "req_"), failed.Headers)
		answer := ends[1]
		assert.Equal(t, classify.StopReasonStop, answer.StopReason)
		assert.Equal(t, "anthropic", answer.Provider)
		assert.Equal(t, providertest.AnthropicModel, answer.Model)
		assert.Equal(t, &session.Usage{Input: 120, Output: 8, CacheRead: 40, CacheWrite: 10, TotalTokens: 178}, answer.Usage)
		assert.Equal(t, 1, count[session.AutoRetryStart](ev.all()))
		var deltas []string
		for _, e := range ev.all() {
			if u, ok := e.(session.MessageUpdate); ok {
				assert.Equal(t, "text", u.Delta.Kind)
				deltas = append(deltas, u.Delta.Text)
			}
		}
		assert.Equal(t, []string{"Hello ", "there"}, deltas)
	})
}

// count returns a counter of the events of type E.
func count[E session.Event](evs []session.Event) int {
	n := 0
	for _, ev := range evs {
		if _, ok := ev.(E); ok {
			n++
		}
	}
	return n
}

// Issue 13 item 2 (2): a 429's retry-after is the wait when the settings
// honour it.
func TestRateLimitHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		srv.Push(providertest.AnthropicRateLimit(20*time.Second, time.Now()), text("done"))
		cfg := fastConfig()
		cfg.Retry.HonorRetryAfter = true
		s := newSession(t, newAgent(srv), cfg)
		ev := watch(s)
		start := time.Now()
		require.NoError(t, s.Prompt(t.Context(), "hi"))
		assert.Equal(t, 20*time.Second, time.Since(start))
		var waits []int64
		for _, e := range ev.all() {
			if r, ok := e.(session.AutoRetryStart); ok {
				waits = append(waits, r.DelayMs)
			}
		}
		assert.Equal(t, []int64{20000}, waits)
		failed := ev.ends()[0]
		assert.Equal(t, "20", failed.Headers["retry-after"])
		assert.Equal(t, "0", failed.Headers["anthropic-ratelimit-requests-remaining"])
		assert.Equal(t, "rate_limit_error", failed.ErrorType)
	})
}

// Issue 13 item 2 (3): "prompt is too long" compacts the context and the
// continuation succeeds, sent with the summary in place of the cut messages.
func TestOverflowCompactsAndContinues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		cfg := fastConfig()
		cfg.Compaction.KeepRecentTokens = 50
		s := newSession(t, newAgent(srv), cfg)
		ev := watch(s)
		long := strings.Repeat("lorem ipsum dolor sit amet ", 30)
		for i := range 3 {
			srv.Push(text(fmt.Sprintf("answer %d: %s", i, long)))
			require.NoError(t, s.Prompt(t.Context(), fmt.Sprintf("question %d: %s", i, long)))
		}
		srv.Push(providertest.AnthropicPromptTooLong(213462, 200000), text("continued"))
		require.NoError(t, s.Prompt(t.Context(), "and now?"))
		assert.Equal(t, "continued", lastText(s))
		assert.Equal(t, 1, count[session.AutoCompactionStart](ev.all()))

		reqs := srv.Settled()
		require.Len(t, reqs, 5)
		before, after := bodyMessages(t, reqs[3]), bodyMessages(t, reqs[4])
		assert.Less(t, len(after), len(before))
		first, err := json.Marshal(after[0])
		require.NoError(t, err)
		assert.Contains(t, string(first), "compacted into the following summary")
		last, err := json.Marshal(after[len(after)-1])
		require.NoError(t, err)
		assert.Contains(t, string(last), "and now?")
	})
}

// Issue 13 item 2 (4): a stream cut part-way (a reset, an unexpected EOF,
// or a clean end without message_stop) is a transient failure, retried.
func TestCutStreamIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{{"reset", nil}, {"unexpected EOF", io.ErrUnexpectedEOF}, {"clean EOF", io.EOF}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := providertest.NewAnthropic(t)
				cut := text("a long answer that is cut")
				cut.Break = &providertest.Break{After: 4, Err: tc.err}
				srv.Push(cut, text("whole"))
				s := newSession(t, newAgent(srv), fastConfig())
				ev := watch(s)
				require.NoError(t, s.Prompt(t.Context(), "hi"))
				assert.Equal(t, "whole", lastText(s))
				failed := ev.ends()[0]
				assert.Equal(t, classify.StopReasonError, failed.StopReason)
				assert.Error(t, failed.Err)
				assert.Equal(t, 1, count[session.AutoRetryStart](ev.all()), failed.ErrorMessage)
			})
		})
	}
}
