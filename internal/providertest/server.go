package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// Reply is one scripted response.
type Reply struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Header is sent as is; the fake adds the provider's request id header
	// and the Content-Type when Header lacks them.
	Header http.Header
	// Body is the response to a request that did not ask for a stream, and
	// to every request when Events is nil: a message, or an error body.
	Body []byte
	// Events, when not nil, is the stream sent to a request that asked for
	// one ("stream": true), as server-sent events.
	Events []Event
	// Break, when not nil, stops the reply part-way.
	Break *Break
}

// Break stops a reply part-way, as a dropped connection or a stalled server
// does.
type Break struct {
	// After is how much of the reply goes out before the break: a number of
	// events for a stream (After at or past the last event breaks after all
	// of them, before the end of the body), a number of bytes for a body.
	// Below 0 it is 0.
	After int
	// NoHeaders breaks before the status line: the client's round trip
	// itself fails (or, with Stall, waits), and After is not used.
	NoHeaders bool
	// Stall holds the reply at the break until the request's context ends,
	// as a server that stops sending does; the client's round trip or read
	// then fails with the context's cause.
	Stall bool
	// Err is what the client's round trip or read fails with at a break that
	// does not stall: ErrConnectionReset when nil. io.EOF ends the body
	// early but cleanly: a stream without its last events, which an SSE
	// reader takes for one that ended between events. On a real server
	// (httptest) the connection is closed whatever Err says.
	Err error
}

// Event is one server-sent event.
type Event struct {
	// Name is the event's "event:" field; empty, the event has none (as
	// OpenAI's chunks).
	Name string
	// Data is the event's "data:" field, one line of JSON as the providers
	// send it (each line of a multi-line Data goes out as its own field).
	Data string
}

// wire returns the event as it goes out, ended by its blank line.
func (e Event) wire() []byte {
	var b bytes.Buffer
	if e.Name != "" {
		b.WriteString("event: " + e.Name + "\n")
	}
	for _, line := range strings.Split(e.Data, "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	return b.Bytes()
}

// Request is what the fake received, and what became of its reply.
type Request struct {
	Method string
	Path   string
	Header http.Header
	// Raw is the body as sent; Body is the same decoded, nil when it is not
	// a JSON object.
	Raw  []byte
	Body map[string]any
	// Stream is true when the body asked for a stream ("stream": true).
	Stream bool
	// Received is when the fake received the request (by the clock of the
	// test's bubble under testing/synctest).
	Received time.Time
	// Rejected is, when the fake answered with its own error rather than
	// the next scripted reply, why: a wrong route, a missing key or field,
	// an empty script. A rejected request uses up no reply.
	Rejected string
	// Complete is true when the whole reply reached the client.
	Complete bool
	// Cancelled is true when the request's context ended (the client
	// aborted, or its deadline passed) before the reply was complete.
	Cancelled bool

	done chan struct{}
}

// Key returns the credential the request carried: the x-api-key header, or
// else the token of an "Authorization: Bearer" header.
func (r Request) Key() string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return t
	}
	return ""
}

// provider is what differs between the fakes.
type provider struct {
	name string
	// baseURL is what a client of the fake is given as the API's base URL.
	baseURL string
	// method and path are the one route served.
	method, path string
	// requestIDHeader is the header that carries the request id.
	requestIDHeader string
	// check returns the reply the real API gives a request it refuses
	// before any model runs (no key, a missing field), and why.
	check func(r *Request) (Reply, string, bool)
	// fail is the provider's error reply, for a wrong route and an empty
	// script.
	fail func(status int, message string) Reply
	// events adapts the scripted events to the request (OpenAI sends its
	// usage chunk only when asked).
	events func(r *Request, events []Event) []Event
}

// Server is a fake provider API: an http.Handler that answers each request
// to its route with the next scripted Reply, and records every request.
//
// A request the real API would refuse before any model runs (a wrong route,
// no API key, a body without the required fields) gets the error the API
// gives it, without using a reply; an empty script, or a wrong route, also
// fails the test. Its methods are safe for concurrent use.
type Server struct {
	t testing.TB
	p provider

	mu       sync.Mutex
	replies  []Reply
	requests []*Request
}

func newServer(t testing.TB, p provider) *Server {
	return &Server{t: t, p: p}
}

// Push queues replies, answered in order, one per request.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, replies...)
}

// Pending returns the number of queued replies not yet used.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.replies)
}

// Requests returns the requests received so far, in order; one whose reply
// is still going out has Complete and Cancelled false.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = *r
		out[i].Header = r.Header.Clone()
	}
	return out
}

// Settled waits until the reply to every request received so far has ended
// (sent whole, broken, or stopped by the request's context), then returns
// the requests as Requests does. A reply that stalls waits for its request's
// context, so a test that never ends that context waits for ever.
func (s *Server) Settled() []Request {
	for {
		s.mu.Lock()
		n := len(s.requests)
		done := make([]chan struct{}, n)
		for i, r := range s.requests {
			done[i] = r.done
		}
		s.mu.Unlock()
		for _, d := range done {
			<-d
		}
		s.mu.Lock()
		more := len(s.requests) > n
		s.mu.Unlock()
		if !more {
			return s.Requests()
		}
	}
}

// BaseURL returns the base URL to give the provider's client with Client (a
// host that resolves nowhere: only Client reaches it).
func (s *Server) BaseURL() string { return s.p.baseURL }

// Client returns an HTTP client served by s in process (see Client).
func (s *Server) Client() *http.Client { return Client(s) }

// ServeHTTP answers r with the next reply, or with the provider's own error
// when r is one the real API would refuse.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := &Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Received: time.Now(), done: make(chan struct{})}
	raw, err := io.ReadAll(r.Body)
	req.Raw = raw
	if err == nil && len(raw) > 0 {
		var body map[string]any
		if json.Unmarshal(raw, &body) == nil {
			req.Body = body
			req.Stream = body["stream"] == true
		}
	}

	s.mu.Lock()
	n := len(s.requests) + 1
	s.requests = append(s.requests, req)
	reply, rejected, fatal := s.next(req, err)
	req.Rejected = rejected
	s.mu.Unlock()
	if fatal {
		s.t.Errorf("providertest: %s request %d, %s %s: %s", s.p.name, n, r.Method, r.URL.Path, rejected)
	}

	complete, cancelled := false, false
	defer func() {
		s.mu.Lock()
		req.Complete, req.Cancelled = complete, cancelled
		s.mu.Unlock()
		close(req.done)
	}()
	complete = s.serve(w, r, req, reply)
	cancelled = !complete && r.Context().Err() != nil
}

// next returns the reply to req; when it is the fake's own, why, and
// whether the test is wrong (a wrong route, an empty script) rather than the
// request (no key, a missing field: what a test of an adapter may mean to
// send). s.mu is held.
func (s *Server) next(req *Request, readErr error) (reply Reply, why string, fatal bool) {
	switch {
	case req.Method != s.p.method || req.Path != s.p.path:
		why := fmt.Sprintf("no such route: this fake serves %s %s", s.p.method, s.p.path)
		return s.p.fail(http.StatusNotFound, "Not Found"), why, true
	case readErr != nil:
		why := fmt.Sprintf("reading the request body: %v", readErr)
		return s.p.fail(http.StatusBadRequest, why), why, false
	}
	if reply, why, refused := s.p.check(req); refused {
		return reply, why, false
	}
	if len(s.replies) == 0 {
		why := "no reply left in the script"
		return s.p.fail(http.StatusInternalServerError, "providertest: "+why), why, true
	}
	reply = s.replies[0]
	s.replies = s.replies[1:]
	return reply, "", false
}

// serve writes reply and reports whether it went out whole.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, req *Request, reply Reply) bool {
	b := reply.Break
	after := 0
	if b != nil {
		after = max(b.After, 0)
	}
	if b != nil && b.NoHeaders {
		s.interrupt(w, r, b)
		return false
	}
	h := w.Header()
	for k, v := range reply.Header {
		h[k] = append([]string(nil), v...)
	}
	if h.Get(s.p.requestIDHeader) == "" {
		h.Set(s.p.requestIDHeader, newRequestID())
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	if req.Stream && reply.Events != nil {
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", "text/event-stream; charset=utf-8")
		}
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(status)
		events := s.p.events(req, reply.Events)
		for i, e := range events {
			if b != nil && i == after {
				s.interrupt(w, r, b)
				return false
			}
			if _, err := w.Write(e.wire()); err != nil {
				return false
			}
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		if b != nil {
			s.interrupt(w, r, b)
			return false
		}
		return true
	}
	if h.Get("Content-Type") == "" && len(reply.Body) > 0 {
		h.Set("Content-Type", "application/json")
	}
	body := reply.Body
	if b != nil {
		body = body[:min(after, len(body))]
	}
	w.WriteHeader(status)
	if _, err := w.Write(body); err != nil {
		return false
	}
	if b != nil {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		s.interrupt(w, r, b)
		return false
	}
	return true
}

// interrupt carries out a break.
func (s *Server) interrupt(w http.ResponseWriter, r *http.Request, b *Break) {
	if b.Stall {
		<-r.Context().Done()
		// The client reads its context's end, never the body's end that
		// the handler's return would make.
		if bw, ok := w.(breaker); ok {
			bw.breakWith(context.Cause(r.Context()))
		}
		return
	}
	err := b.Err
	if err == nil {
		err = ErrConnectionReset
	}
	if bw, ok := w.(breaker); ok {
		bw.breakWith(err)
		return
	}
	panic(http.ErrAbortHandler)
}

var requestIDs atomic.Int64

// newRequestID returns a request id of the providers' shape, unique in the
// process.
func newRequestID() string {
	return fmt.Sprintf("req_011CFake%014d", requestIDs.Add(1))
}

// marshal encodes v as the providers do: compact, with <, > and & literal.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("providertest: encoding %T: %v", v, err))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// chunks splits s into pieces of at most n runes, never splitting a rune;
// an empty s gives no piece.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i, count := 0, 0
		for i < len(s) && count < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// words splits s after each space, so the pieces join back to s; an empty s
// gives no piece.
func words(s string) []string {
	var out []string
	for _, w := range strings.SplitAfter(s, " ") {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}
