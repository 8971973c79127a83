package providertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"syscall"
)

// ErrConnectionReset is what a read of a reply that Break cuts returns by
// default: the error a Go client sees when the server's TCP connection is
// reset (errors.Is(err, syscall.ECONNRESET) holds).
var ErrConnectionReset error = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}

// Client returns an HTTP client whose transport serves every request with h
// in process, through a pipe: the response's headers reach the client when h
// writes them, and each write of h reaches the client's read as it is made,
// so a stream can be read event by event. It behaves as Go's transport does
// where a test can tell: a request whose context ends before the headers
// fails with context.Cause of it, and so does a read of the body after it
// ends; closing the body makes h's next write fail. The transport follows no
// redirect and keeps no connection; header names reach either side in
// canonical form, as off the wire.
func Client(h http.Handler) *http.Client {
	return &http.Client{Transport: Transport(h)}
}

// Transport is the round tripper of Client.
func Transport(h http.Handler) http.RoundTripper {
	return transport{h}
}

type transport struct{ h http.Handler }

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if ctx.Err() != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, context.Cause(ctx)
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	sreq := req.Clone(ctx)
	sreq.Header = canonical(req.Header)
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	sreq.RequestURI = req.URL.RequestURI()
	if sreq.Host == "" {
		sreq.Host = req.URL.Host
	}
	go func() {
		defer sreq.Body.Close()
		defer w.finish()
		defer func() {
			// A handler that breaks the connection on a real server panics
			// with http.ErrAbortHandler; here that is a reset.
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler {
					panic(v)
				}
				w.breakWith(ErrConnectionReset)
			}
		}()
		t.h.ServeHTTP(w, sreq)
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		err := context.Cause(ctx)
		pr.CloseWithError(err)
		return nil, err
	}
	if w.err != nil {
		pr.CloseWithError(w.err)
		return nil, w.err
	}
	b := &body{pr: pr}
	b.stop = context.AfterFunc(ctx, func() { pw.CloseWithError(context.Cause(ctx)) })
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          b,
		ContentLength: -1,
		Request:       req,
	}, nil
}

// body is a response body read from the pipe; closing it stops the watch on
// the request's context.
type body struct {
	pr   *io.PipeReader
	stop func() bool
}

func (b *body) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *body) Close() error {
	b.stop()
	return b.pr.Close()
}

// pipeWriter is the http.ResponseWriter of a handler served in process. Only
// the handler's goroutine calls its methods; the round trip reads code, sent
// and err once ready is closed.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	ready  chan struct{}

	wroteHeader bool
	code        int
	sent        http.Header
	err         error // the break before the headers
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	w.code = code
	w.sent = canonical(w.header)
	close(w.ready)
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.pw.Write(p)
}

// Flush does nothing: every write already reaches the reader.
func (w *pipeWriter) Flush() {}

// breakWith ends the exchange with err: before the headers, the round trip
// fails with it; after them, the client's next read of the body does.
func (w *pipeWriter) breakWith(err error) {
	if !w.wroteHeader {
		w.wroteHeader = true
		w.err = err
		close(w.ready)
		return
	}
	w.pw.CloseWithError(err)
}

// finish ends the body once the handler returns (a body already broken
// keeps its error).
func (w *pipeWriter) finish() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.pw.Close()
}

// canonical returns a copy of h with its names in canonical form, as a
// header read off the wire has them.
func canonical(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for name, values := range h {
		key := textproto.CanonicalMIMEHeaderKey(name)
		out[key] = append(out[key], values...)
	}
	return out
}

// breaker is implemented by the in-process writer; a real server's writer
// is broken with a panic of http.ErrAbortHandler instead.
type breaker interface{ breakWith(error) }

var _ breaker = (*pipeWriter)(nil)
