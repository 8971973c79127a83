// Package sse reads a stream of server-sent events, as the provider
// adapters of this module receive their streamed answers (the
// text/event-stream format of the HTML standard, "Server-sent events").
//
// A Reader hands out each event that has data: its type (the last
// "event:" line, "" when none) and its data lines joined with "\n".
// Comments (lines starting with ":"), "id:" and "retry:" lines and any
// other field are skipped; an event without a data line is not handed
// out. Lines end in "\n" or "\r\n". An event longer than the Reader's
// bound fails the read instead of growing without end.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/agentfsm/agentfsm/session"
)

// Event is one server-sent event.
type Event struct {
	// Type is the event's type: its last "event:" line's value, "" when
	// it had none.
	Type string
	// Data is the event's data lines joined with "\n".
	Data []byte
}

// Reader reads the events of a stream.
type Reader struct {
	br       *bufio.Reader
	maxEvent int
	err      error
}

// NewReader returns a reader of the events of r, failing an event whose
// lines (up to the blank line that ends it) pass maxEvent bytes.
func NewReader(r io.Reader, maxEvent int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), maxEvent: maxEvent}
}

// Next returns the next event that has data. At the end of the stream it
// returns io.EOF when the stream ended between events, and an error
// wrapping io.ErrUnexpectedEOF when it ended inside one (the event is
// lost). An event past the Reader's bound is an error wrapping
// session.ErrStreamLimit; an error of the underlying reader is returned as
// it is. Once Next has returned an error, it returns the same one.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	ev, err := r.next()
	if err != nil {
		r.err = err
	}
	return ev, err
}

func (r *Reader) next() (Event, error) {
	var (
		typ     string
		data    bytes.Buffer
		hasData bool
		size    int  // bytes of the event's lines so far
		pending bool // a line of the event was read
		line    []byte
	)
	for {
		chunk, err := r.br.ReadSlice('\n')
		size += len(chunk)
		if size > r.maxEvent {
			return Event{}, fmt.Errorf("%w: one server-sent event passed %s without the blank line that ends it (session.MaxStreamEvent)", session.ErrStreamLimit, sizeText(r.maxEvent))
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			line = append(line, chunk...)
			continue
		}
		if err != nil {
			if err == io.EOF {
				if pending || len(line) > 0 || len(chunk) > 0 {
					return Event{}, fmt.Errorf("sse: the stream ended inside an event: %w", io.ErrUnexpectedEOF)
				}
				return Event{}, io.EOF
			}
			return Event{}, err
		}
		if len(line) > 0 {
			line = append(line, chunk...)
		} else {
			line = chunk
		}
		text := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		line = line[:0:0]
		if len(text) == 0 {
			if hasData {
				out := data.Bytes()
				return Event{Type: typ, Data: out[:len(out)-1]}, nil
			}
			// An event without data is no event; its type is dropped.
			typ, size, pending = "", 0, false
			continue
		}
		pending = true
		if text[0] == ':' {
			continue // a comment
		}
		name, value, _ := bytes.Cut(text, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "event":
			typ = string(value)
		case "data":
			data.Write(value)
			data.WriteByte('\n')
			hasData = true
		}
	}
}

// sizeText writes n bytes in MiB when it is a whole number of them, else
// in bytes.
func sizeText(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
