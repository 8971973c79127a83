package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// MaxStreamEvent is the most bytes of one server-sent event that the
// adapters of this module read (LimitEventStream): an event's lines up to
// the blank line that ends it. A real event is one chunk of an answer
// (kilobytes; a whole tool call's arguments at most); a reader holds an
// event's data lines in memory until its blank line, so a server that never
// sends one would otherwise grow them without bound.
const MaxStreamEvent = 8 << 20

// MaxStreamBody is the most bytes of one streamed answer, events and their
// framing included, that the adapters of this module read
// (LimitEventStream): the longest answer a model gives (128k output tokens,
// a few hundred bytes of framing each) is a fraction of it, and a server
// that streams events forever is cut there.
const MaxStreamBody = 128 << 20

// ErrStreamLimit is wrapped by the error of a streamed answer that broke a
// bound of LimitEventStream: an event longer than its limit, or a stream
// longer than its. The classifier takes it as fatal: the same server would
// send the same stream again.
var ErrStreamLimit = errors.New("session: the server's stream broke a size limit")

// LimitEventStream bounds the body of resp, when its status is not an error
// (below 400), as a stream of server-sent events: a read fails with an error
// wrapping ErrStreamLimit, once the bytes that did it were handed out, when
// one event (its lines up to the blank line, "\n" or "\r\n", that ends it)
// passes maxEvent bytes or the whole body passes maxBody bytes. The error's
// text names the limit. Error responses are LimitErrorBody's; a nil resp or
// body is left as it is. An adapter calls it on each response before its
// client reads the body.
func LimitEventStream(resp *http.Response, maxEvent, maxBody int64) {
	if resp == nil || resp.Body == nil || resp.StatusCode >= 400 {
		return
	}
	resp.Body = &eventStreamBody{rc: resp.Body, maxEvent: maxEvent, maxBody: maxBody}
}

// eventStreamBody is the body of LimitEventStream.
type eventStreamBody struct {
	rc                io.ReadCloser
	maxEvent, maxBody int64

	total int64 // bytes read
	event int64 // bytes of the event being read
	line  int64 // bytes of the line being read
	cr    bool  // the line so far is a lone "\r"
	err   error
}

func (b *eventStreamBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	b.total += int64(n)
	for chunk := p[:n]; len(chunk) > 0; {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			b.cr = b.line == 0 && len(chunk) == 1 && chunk[0] == '\r'
			b.line += int64(len(chunk))
			b.event += int64(len(chunk))
			break
		}
		seg := chunk[:i]
		blank := b.line == 0 && (len(seg) == 0 || (len(seg) == 1 && seg[0] == '\r')) ||
			b.line == 1 && b.cr && len(seg) == 0
		if blank {
			b.event = 0
		} else {
			b.event += int64(len(seg)) + 1
		}
		b.line, b.cr = 0, false
		chunk = chunk[i+1:]
	}
	switch {
	case b.event > b.maxEvent:
		b.err = fmt.Errorf("%w: one server-sent event passed %s without the blank line that ends it (session.MaxStreamEvent)", ErrStreamLimit, sizeText(b.maxEvent))
	case b.total > b.maxBody:
		b.err = fmt.Errorf("%w: the answer's stream passed %s (session.MaxStreamBody)", ErrStreamLimit, sizeText(b.maxBody))
	}
	if b.err != nil {
		return n, b.err
	}
	return n, err
}

// Close closes the body, and so the connection when it was cut short.
func (b *eventStreamBody) Close() error { return b.rc.Close() }

// sizeText writes n bytes in MiB when it is a whole number of them, as the
// limits are, else in bytes.
func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
