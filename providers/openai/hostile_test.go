package openai_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/internal/providertest"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/providers/openai"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// hostileAgent is an agent whose every request is answered by a 200 event
// stream of what body writes; written counts the bytes that reached the
// client. When body returns nil the server keeps the connection open and
// sends nothing more.
func hostileAgent(written *atomic.Int64, body func(w func([]byte) error) error) *openai.Agent {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		write := func(p []byte) error {
			n, err := w.Write(p)
			written.Add(int64(n))
			return err
		}
		if body(write) == nil {
			<-r.Context().Done()
		}
	})
	return openai.New(openai.Options{Model: providertest.OpenAIModel, BaseURL: "http://openai.test/v1/",
		HTTPClient: providertest.Client(handler), Secrets: credentials.EnvSecrets{Lookup: lookup}})
}

// TestOpenAIEventWithoutEndIsBounded: data lines without the blank line
// that ends an event fail the call once the event passes
// session.MaxStreamEvent, with an error naming the limit that the session
// does not retry; the client reads little past it (before, the SDK held
// every line until the idle timeout).
func TestOpenAIEventWithoutEndIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var written atomic.Int64
		line := []byte("data: " + strings.Repeat("x", 64<<10) + "\r\n")
		a := hostileAgent(&written, func(w func([]byte) error) error {
			for written.Load() < 3*session.MaxStreamEvent {
				if err := w(line); err != nil {
					return err
				}
			}
			return nil
		})
		s, err := session.New(a, session.WithModel(a.Model()))
		require.NoError(t, err)
		defer s.Close()
		err = s.Prompt(context.Background(), "hi")
		require.ErrorIs(t, err, policy.ErrProvider)
		var failed []transcript.Message
		for _, m := range s.Messages() {
			if m.Role == transcript.RoleAssistant {
				failed = append(failed, m)
			}
		}
		require.Len(t, failed, 1, "the failure is not retried")
		assert.ErrorIs(t, failed[0].Err, session.ErrStreamLimit)
		assert.Contains(t, failed[0].ErrorMessage, "one server-sent event passed 8 MiB without the blank line that ends it")
		assert.Less(t, written.Load(), int64(session.MaxStreamEvent+1<<20), "the client read past the limit")
	})
}

// TestOpenAIManyDeltasAreLinear: an answer of many small text and
// reasoning deltas costs memory in proportion to its length, not to its
// square (each delta was appended to a string, copying the text so far).
func TestOpenAIManyDeltasAreLinear(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const deltas = 6000
		piece := strings.Repeat("y", 100)
		var written atomic.Int64
		a := hostileAgent(&written, func(w func([]byte) error) error {
			var b bytes.Buffer
			for range deltas {
				fmt.Fprintf(&b, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q,\"reasoning_content\":%q},\"finish_reason\":null}]}\n\n", piece, piece)
			}
			b.WriteString("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
			if err := w(b.Bytes()); err != nil {
				return err
			}
			return fmt.Errorf("done")
		})
		s, err := session.New(a, session.WithModel(a.Model()))
		require.NoError(t, err)
		defer s.Close()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		runtime.ReadMemStats(&after)
		m := lastAssistant(t, s)
		require.Len(t, m.Content, 2)
		assert.Equal(t, strings.Repeat(piece, deltas), m.Content[0].Thinking)
		assert.Equal(t, strings.Repeat(piece, deltas), m.Content[1].Text)
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("allocated for two %d-byte blocks in %d deltas: %d MiB", deltas*len(piece), deltas, allocated>>20)
		assert.Less(t, allocated, uint64(200<<20), "the answer's deltas are copied over and over")
	})
}

// TestOpenAIHostileUsageIsSane: negative usage counts (and the negative
// total the server adds up from them) give a usage of zeros, not negative
// counts in the message, its history and its metrics.
func TestOpenAIHostileUsageIsSane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, policy.DefaultConfig(), nil)
		h.fake.Push(providertest.OpenAICompletion{Content: "hi", Usage: providertest.OpenAIUsage{PromptTokens: -5, CompletionTokens: -3, CachedTokens: -2}}.Reply())
		require.NoError(t, h.s.Prompt(context.Background(), "one"))
		u := lastAssistant(t, h.s).Usage
		require.NotNil(t, u)
		assert.Equal(t, transcript.Usage{}, *u)
	})
}
