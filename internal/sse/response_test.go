package sse_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/internal/sse"
)

func response(contentType, encoding string, body io.Reader) *http.Response {
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	if encoding != "" {
		h.Set("Content-Encoding", encoding)
	}
	return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(body), ContentLength: 99}
}

// Document tells a document from a stream by its first byte past any
// blank, whatever the type says, reads at most max bytes of it, and leaves
// any other body to read whole, blanks included.
func TestDocument(t *testing.T) {
	for _, tc := range []struct {
		contentType, body string
		doc               bool
		want, mediaType   string
	}{
		{"application/json", ` {"error":"x"}`, true, `{"error":"x"}`, "application/json"},
		{"application/json; charset=utf-8", "\r\n[1]", true, "[1]", "application/json"},
		{"text/html", "<html>" + strings.Repeat("x", 100), true, "<html>" + strings.Repeat("x", 10), "text/html"},
		{"text/event-stream", `{"error":"x"}`, true, `{"error":"x"}`, "text/event-stream"},
		{"", "\n<html>", true, "<html>", "unknown"},
		{"application/json", "data: {}\n\n", false, "", ""},
		{"text/event-stream", "\n \ndata: {}\n\n", false, "", ""},
		{"text/event-stream", " data: {}\n\n", false, "", ""},
		{"application/json", "  \n", false, "", ""},
		{"text/event-stream", ": comment\n\n", false, "", ""},
		{"", "", false, "", ""},
	} {
		resp := response(tc.contentType, "", iotest.OneByteReader(strings.NewReader(tc.body)))
		body, mt, ok, err := sse.Document(resp, 16)
		require.NoError(t, err)
		assert.Equal(t, tc.doc, ok, "%q %q", tc.contentType, tc.body)
		if ok {
			assert.Equal(t, tc.want, string(body))
			assert.Equal(t, tc.mediaType, mt)
			continue
		}
		rest, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, tc.body, string(rest), "the body reads as it was")
	}
	// A blank run longer than a peek is no document.
	resp := response("", "", strings.NewReader(strings.Repeat("\n", 5000)+"{}"))
	_, _, ok, err := sse.Document(resp, 16)
	require.NoError(t, err)
	assert.False(t, ok)
	// A read error is the caller's.
	boom := errors.New("boom")
	_, _, _, err = sse.Document(response("application/json", "", iotest.ErrReader(boom)), 16)
	assert.ErrorIs(t, err, boom)
}

// Inflate undoes a gzip encoding the transport left, with the header and
// length gone; a body marked gzip that is not fails its read saying so; a
// body the transport inflated, or not marked, is left alone.
func TestInflate(t *testing.T) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte("data: x\n\n"))
	require.NoError(t, zw.Close())

	resp := response("text/event-stream", "GZIP", bytes.NewReader(b.Bytes()))
	sse.Inflate(resp)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "data: x\n\n", string(got))
	assert.Empty(t, resp.Header.Get("Content-Encoding"))
	assert.EqualValues(t, -1, resp.ContentLength)
	assert.True(t, resp.Uncompressed)

	resp = response("text/event-stream", "gzip", strings.NewReader("data: x\n\n"))
	sse.Inflate(resp)
	_, err = io.ReadAll(resp.Body)
	assert.ErrorContains(t, err, "sse: the body is marked gzip but is not")

	cut := response("text/event-stream", "gzip", bytes.NewReader(b.Bytes()[:len(b.Bytes())-6]))
	sse.Inflate(cut)
	_, err = io.ReadAll(cut.Body)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "a gzip body cut short is an unexpected EOF, transient")

	empty := response("text/event-stream", "gzip", strings.NewReader(""))
	sse.Inflate(empty)
	got, err = io.ReadAll(empty.Body)
	assert.NoError(t, err)
	assert.Empty(t, got)

	plain := response("text/event-stream", "", strings.NewReader("data: x\n\n"))
	sse.Inflate(plain)
	got, err = io.ReadAll(plain.Body)
	require.NoError(t, err)
	assert.Equal(t, "data: x\n\n", string(got))
}
