// Package lines reads input line by line, as a stream, with lines of any
// length up to a limit: the classify command and the RPC server both read
// this way. A longer line is consumed to its end without being kept, so one
// bad line never stops the lines after it.
package lines

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// Reader reads lines of up to max bytes. Lines split on \n only; a \r
// before it is dropped.
type Reader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

// NewReader reads r with a limit of max bytes a line.
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// ErrTooLong reports a line over the reader's limit; the line was consumed.
var ErrTooLong = errors.New("line too long")

// Next returns the next line without its "\n" (and without a "\r" before
// it). At the end of the input it returns io.EOF; a last line without a
// newline is still returned first. The slice is valid until the next call.
func (lr *Reader) Next() ([]byte, error) {
	lr.buf = lr.buf[:0]
	tooLong := false
	for {
		chunk, err := lr.br.ReadSlice('\n')
		if !tooLong {
			if len(lr.buf)+len(chunk) > lr.max+2 { // room for "\r\n"
				tooLong = true
				lr.buf = lr.buf[:0]
			} else {
				lr.buf = append(lr.buf, chunk...)
			}
		}
		switch {
		case err == nil:
			return lr.finish(tooLong)
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(lr.buf) == 0 && !tooLong {
				return nil, io.EOF
			}
			return lr.finish(tooLong)
		default:
			return nil, err
		}
	}
}

func (lr *Reader) finish(tooLong bool) ([]byte, error) {
	if tooLong {
		return nil, ErrTooLong
	}
	line := bytes.TrimSuffix(lr.buf, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) > lr.max {
		return nil, ErrTooLong
	}
	return line, nil
}

// Buffered reports whether input is waiting to be read, so a writer can
// hold its output until the reader would block.
func (lr *Reader) Buffered() bool { return lr.br.Buffered() > 0 }
