package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// lineReader reads input lines of any length up to max bytes, as a stream.
// A longer line is consumed to its end without being kept and reported as
// too long, so one bad line never stops the lines after it.
type lineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// errLineTooLong reports a line over the reader's limit.
var errLineTooLong = errors.New("line too long")

// next returns the next line without its "\n" (and without a "\r" before
// it). At the end of the input it returns io.EOF; a last line without a
// newline is still returned first. The slice is valid until the next call.
func (lr *lineReader) next() ([]byte, error) {
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

func (lr *lineReader) finish(tooLong bool) ([]byte, error) {
	if tooLong {
		return nil, errLineTooLong
	}
	line := bytes.TrimSuffix(lr.buf, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) > lr.max {
		return nil, errLineTooLong
	}
	return line, nil
}

// buffered reports whether input is waiting to be read, so a writer can
// hold its output until the reader would block.
func (lr *lineReader) buffered() bool { return lr.br.Buffered() > 0 }
