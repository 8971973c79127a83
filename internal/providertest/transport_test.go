package providertest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/internal/providertest"
)

// TestClientDeliversEachWrite: the response reaches the client with its
// headers, and each write as it is made, while the handler still runs.
func TestClientDeliversEachWrite(t *testing.T) {
	next := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Test", "yes")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, "first\n")
		<-next
		fmt.Fprint(w, "second\n")
	})
	res, err := providertest.Client(h).Get("http://example.test/x")
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, http.StatusAccepted, res.StatusCode)
	assert.Equal(t, "202 Accepted", res.Status)
	assert.Equal(t, "yes", res.Header.Get("X-Test"))
	r := bufio.NewReader(res.Body)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "first\n", line)
	close(next)
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, "second\n", string(rest))
}

// TestClientCanonicalHeaders: header names set outside Header.Set reach
// the other side in canonical form, as over a socket.
func TestClientCanonicalHeaders(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	reply := providertest.AnthropicMessage{}.Reply()
	reply.Header = http.Header{"retry-after": {"3"}}
	srv.Push(reply)
	req, err := http.NewRequest("POST", srv.BaseURL()+"v1/messages", strings.NewReader(`{"model":"m","max_tokens":1,"messages":[]}`))
	require.NoError(t, err)
	req.Header["x-api-key"] = []string{"lower"}
	req.Header["anthropic-version"] = []string{"2023-06-01"}
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "3", res.Header.Get("Retry-After"))
	r := srv.Settled()[0]
	assert.Equal(t, "lower", r.Key())
	assert.Equal(t, []string{"lower"}, r.Header["X-Api-Key"])
}

// TestClientCloseFailsTheHandlersWrite: a client that closes the body
// makes the handler's next write fail, so the handler ends.
func TestClientCloseFailsTheHandlersWrite(t *testing.T) {
	writeErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for {
			if _, err := fmt.Fprint(w, "tick\n"); err != nil {
				writeErr <- err
				return
			}
		}
	})
	res, err := providertest.Client(h).Get("http://example.test/x")
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.ErrorIs(t, <-writeErr, io.ErrClosedPipe)
}

// TestClientContextDoneBeforeRequest: a request whose context has ended
// never reaches the handler, and fails with the context's cause.
func TestClientContextDoneBeforeRequest(t *testing.T) {
	called := false
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("the user left")
	cancel(cause)
	req, err := http.NewRequestWithContext(ctx, "POST", "http://example.test/x", strings.NewReader("{}"))
	require.NoError(t, err)
	_, err = providertest.Client(h).Do(req)
	require.ErrorIs(t, err, cause)
	assert.False(t, called)
}

// TestEventDataLines: a multi-line event goes out as one data field per
// line, which a reader joins back with newlines.
func TestEventDataLines(t *testing.T) {
	srv := providertest.NewOpenAI(t)
	srv.Push(providertest.Reply{Events: []providertest.Event{{Name: "note", Data: "one\ntwo"}, providertest.OpenAIDone}})
	req, err := http.NewRequest("POST", srv.BaseURL()+"chat/completions", strings.NewReader(`{"model":"m","messages":[],"stream":true}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer k")
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Equal(t, "event: note\ndata: one\ndata: two\n\ndata: [DONE]\n\n", string(b))
	assert.Equal(t, "text/event-stream; charset=utf-8", res.Header.Get("Content-Type"))
	assert.True(t, strings.HasPrefix(res.Header.Get("X-Request-Id"), "req_"))
}

// TestBreakOutOfRange: a negative After breaks before anything is sent; one
// past the end breaks after everything, before the end of the body. The
// OpenAI client stops reading at [DONE], so it never sees such a break; the
// Anthropic client reads on after message_stop, so it reports the break of a
// message that was complete.
func TestBreakOutOfRange(t *testing.T) {
	openAI := providertest.NewOpenAI(t)
	oc := openAIClient(openAI, "k")
	anth := providertest.NewAnthropic(t)
	ac := anthropicClient(anth, "k")
	for _, after := range []int{-3, 1000} {
		reply := providertest.OpenAICompletion{Content: "Hello there"}.Reply()
		reply.Break = &providertest.Break{After: after}
		openAI.Push(reply, reply)
		_, n, err := openAIStream(t.Context(), oc, true)
		_, plainErr := openAINew(t.Context(), oc)
		require.ErrorIs(t, plainErr, syscall.ECONNRESET, "the body is read to its end")
		if after < 0 {
			require.ErrorIs(t, err, syscall.ECONNRESET)
			assert.Zero(t, n)
		} else {
			require.NoError(t, err)
			assert.Equal(t, 5, n, "every chunk went out")
		}

		reply = richMessage.Reply()
		reply.Break = &providertest.Break{After: after}
		anth.Push(reply)
		msg, types, err := anthropicStream(t.Context(), ac)
		require.ErrorIs(t, err, syscall.ECONNRESET)
		if after > 0 {
			assert.Equal(t, "message_stop", types[len(types)-1])
			checkRichMessage(t, msg)
		}
	}
	assert.False(t, openAI.Settled()[3].Complete)
}

// TestConcurrentRequests: each reply is used once, whatever the order the
// requests come in.
func TestConcurrentRequests(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	const n = 16
	for i := range n {
		srv.Push(providertest.AnthropicMessage{Content: []providertest.AnthropicBlock{providertest.AnthropicText(fmt.Sprint("reply ", i))}}.Reply())
	}
	var wg sync.WaitGroup
	got := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			c := anthropicClient(srv, fmt.Sprint("key-", i))
			if i%2 == 0 {
				msg, _, err := anthropicStream(t.Context(), c)
				assert.NoError(t, err)
				got <- msg.Content[0].Text
				return
			}
			msg, err := anthropicNew(t.Context(), c)
			assert.NoError(t, err)
			got <- msg.Content[0].Text
		})
	}
	wg.Wait()
	close(got)
	seen := map[string]bool{}
	for text := range got {
		assert.False(t, seen[text], text)
		seen[text] = true
	}
	assert.Len(t, seen, n)
	assert.Len(t, srv.Settled(), n)
	assert.Zero(t, srv.Pending())
}

// TestOverRealTCP: the fake is a plain http.Handler, so it serves a
// loopback server too (for a test of a built binary); there a break closes
// the connection.
func TestOverRealTCP(t *testing.T) {
	srv := providertest.NewAnthropic(t)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	cut := richMessage.Reply()
	cut.Break = &providertest.Break{After: 4}
	stalled := richMessage.Reply()
	stalled.Break = &providertest.Break{After: 2, Stall: true}
	srv.Push(richMessage.Reply(), cut, stalled)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	c := apiClient{anthropic: true, base: ts.URL, key: "k", hc: hc}

	msg, _, err := anthropicStream(t.Context(), &c)
	require.NoError(t, err)
	checkRichMessage(t, msg)

	_, types, err := anthropicStream(t.Context(), &c)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "a connection closed inside a chunked body")
	assert.Len(t, types, 3)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, _, err = anthropicStream(ctx, &c)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	reqs := srv.Settled()
	require.Len(t, reqs, 3)
	assert.True(t, reqs[0].Complete)
	assert.False(t, reqs[1].Complete)
	assert.False(t, reqs[1].Cancelled)
	assert.True(t, reqs[2].Cancelled)
}
