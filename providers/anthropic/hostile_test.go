package anthropic_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
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
	"github.com/agentfsm/agentfsm/providers/anthropic"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// streamHandler answers every request with a 200 event stream that starts
// with message_start and then writes what body writes; written counts the
// bytes that reached the client.
func streamHandler(written *atomic.Int64, body func(w http.ResponseWriter) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		start := "event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}` + "\n\n"
		n, _ := w.Write([]byte(start))
		written.Add(int64(n))
		if body(countingWriter{w, written}) == nil {
			// The server stops sending but keeps the connection open.
			<-r.Context().Done()
		}
	})
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

// TestEventWithoutEndIsBounded: a server that sends data lines and never
// the blank line that ends an event makes the call fail once the event
// passes session.MaxStreamEvent, with an error naming that limit, which the
// session does not retry; the client reads little past the limit (before,
// the SDK held every line until the idle timeout).
func TestEventWithoutEndIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var written atomic.Int64
		line := []byte("data: " + strings.Repeat("x", 64<<10) + "\n")
		handler := streamHandler(&written, func(w http.ResponseWriter) error {
			for written.Load() < 3*session.MaxStreamEvent {
				if _, err := w.Write(line); err != nil {
					return err
				}
			}
			return nil
		})
		a := anthropic.New(anthropic.Options{BaseURL: "http://anthropic.test", HTTPClient: providertest.Client(handler),
			Secrets: credentials.EnvSecrets{Lookup: lookup}})
		s := newSession(t, a, fastConfig())
		rec := watch(s)
		err := s.Prompt(context.Background(), "hi")
		require.ErrorIs(t, err, policy.ErrProvider)
		ends := rec.ends()
		require.Len(t, ends, 1, "the failure is not retried")
		assert.ErrorIs(t, ends[0].Err, session.ErrStreamLimit)
		assert.Contains(t, ends[0].ErrorMessage, "one server-sent event passed 8 MiB without the blank line that ends it")
		assert.Less(t, written.Load(), int64(session.MaxStreamEvent+1<<20), "the client read past the limit")
	})
}

// TestEndlessAnswerIsLinear: a stream of many small text deltas costs
// memory in proportion to the answer, not to its square (the SDK's
// accumulator appends each delta to a string, copying the text so far).
func TestEndlessAnswerIsLinear(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const deltas = 6000
		piece := strings.Repeat("y", 100)
		var written atomic.Int64
		handler := streamHandler(&written, func(w http.ResponseWriter) error {
			var b bytes.Buffer
			b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
			for range deltas {
				fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", piece)
			}
			b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
			b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":6}}\n\n")
			b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
			_, err := w.Write(b.Bytes())
			if err == nil {
				err = fmt.Errorf("done")
			}
			return err
		})
		a := anthropic.New(anthropic.Options{BaseURL: "http://anthropic.test", HTTPClient: providertest.Client(handler),
			Secrets: credentials.EnvSecrets{Lookup: lookup}})
		s := newSession(t, a, fastConfig())
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		runtime.ReadMemStats(&after)
		assert.Equal(t, strings.Repeat(piece, deltas), lastText(s))
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("allocated for a %d-byte answer in %d deltas: %d MiB", deltas*len(piece), deltas, allocated>>20)
		assert.Less(t, allocated, uint64(200<<20), "the answer's deltas are copied over and over")
	})
}

// TestHostileUsageIsSane: usage counts that are negative, or whose sum
// overflows, give a usage of counts at least 0 whose total saturates at
// math.MaxInt instead of wrapping (to a small number that would turn the
// threshold compaction off).
func TestHostileUsageIsSane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := providertest.NewAnthropic(t)
		a := newAgent(srv)
		s := newSession(t, a, fastConfig())
		srv.Push(providertest.AnthropicMessage{
			Content: []providertest.AnthropicBlock{providertest.AnthropicText("hi")},
			Usage:   providertest.AnthropicUsage{InputTokens: -5, OutputTokens: math.MaxInt64, CacheReadInputTokens: -1, CacheCreationInputTokens: 3},
		}.Reply())
		require.NoError(t, s.Prompt(context.Background(), "one"))
		u := s.Messages()[1].Usage
		require.NotNil(t, u)
		assert.Equal(t, transcript.Usage{Input: 0, Output: math.MaxInt, CacheRead: 0, CacheWrite: 3, TotalTokens: math.MaxInt}, *u)
	})
}
