package sse

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// Inflate makes the body of resp read inflated when the server sent it
// gzip-compressed and Go's transport left it so: the transport inflates
// only what it asked for, so a client whose transport has
// DisableCompression (or another RoundTripper) gets a compressed body as
// the server sent it, asked for or not. The Content-Encoding header and
// the length are removed, as the transport does. A body that is not gzip
// fails its first read with an error that says so. Bounds on the body
// (session.LimitErrorBody, session.LimitEventStream) are to be set after
// Inflate, so that they count the inflated bytes.
func Inflate(resp *http.Response) {
	if resp == nil || resp.Body == nil || resp.Uncompressed {
		return
	}
	if !strings.EqualFold(strings.TrimSpace(resp.Header.Get("Content-Encoding")), "gzip") {
		return
	}
	resp.Body = &gzipBody{rc: resp.Body}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
}

// gzipBody inflates rc, reading the gzip header at the first Read (so that
// making it does not wait on the server).
type gzipBody struct {
	rc  io.ReadCloser
	zr  *gzip.Reader
	err error
}

func (b *gzipBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.zr == nil {
		br := bufio.NewReader(b.rc)
		// The magic number first: a short body that is not gzip is no
		// gzip body cut short.
		if magic, err := br.Peek(2); err == nil && (magic[0] != 0x1f || magic[1] != 0x8b) {
			b.err = fmt.Errorf("sse: the body is marked gzip but is not: %w", gzip.ErrHeader)
			return 0, b.err
		}
		zr, err := gzip.NewReader(br)
		if err != nil {
			if err != io.EOF && err != io.ErrUnexpectedEOF {
				err = fmt.Errorf("sse: the body is marked gzip but is not: %w", err)
			}
			b.err = err
			return 0, err
		}
		b.zr = zr
	}
	n, err := b.zr.Read(p)
	if errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) {
		err = fmt.Errorf("sse: the gzip body is corrupt: %w", err)
	}
	return n, err
}

func (b *gzipBody) Close() error { return b.rc.Close() }

// Document reports whether resp, a successful answer to a request for an
// event stream, is a document instead: its first byte past any blank is
// '{', '[' or '<' (an error object a server sent in place of the stream, a
// proxy's page, an answer not streamed). No event stream begins so (such
// a line is a field no reader knows, skipped), whatever the Content-Type
// says. Then it returns the first max bytes of the body, the rest unread,
// and its media type ("unknown" when the response names none). Otherwise
// resp's body is left to read as it would have. An error is the body's
// read error.
func Document(resp *http.Response, max int64) (body []byte, mediaType string, ok bool, err error) {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "" {
		mt = "unknown"
	}
	br := bufio.NewReader(resp.Body)
	resp.Body = struct {
		io.Reader
		io.Closer
	}{br, resp.Body}
	// Peek, not read: a stream's bytes stay for its reader as they came.
	for i := 0; i < 4096; i++ {
		b, err := br.Peek(i + 1)
		if err == io.EOF {
			return nil, "", false, nil
		}
		if err != nil {
			return nil, "", false, err
		}
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[', '<':
			body, err := io.ReadAll(io.LimitReader(br, max))
			if err != nil {
				return nil, "", false, err
			}
			return bytes.TrimLeft(body, " \t\r\n"), mt, true, nil
		}
		return nil, "", false, nil
	}
	return nil, "", false, nil
}
