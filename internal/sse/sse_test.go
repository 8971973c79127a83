package sse_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentfsm/agentfsm/internal/sse"
	"github.com/agentfsm/agentfsm/session"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// all reads the events of stream, a byte at a time and whole, and
// checks both reads agree.
func all(t *testing.T, stream string, maxEvent int) ([]sse.Event, error) {
	t.Helper()
	read := func(r io.Reader) ([]sse.Event, error) {
		rd := sse.NewReader(r, maxEvent)
		var out []sse.Event
		for {
			ev, err := rd.Next()
			if err != nil {
				again, err2 := rd.Next()
				assert.Equal(t, sse.Event{}, again)
				assert.Equal(t, err, err2, "Next after an error returns it again")
				if err == io.EOF {
					err = nil
				}
				return out, err
			}
			out = append(out, ev)
		}
	}
	whole, wholeErr := read(strings.NewReader(stream))
	bytewise, byteErr := read(iotest.OneByteReader(strings.NewReader(stream)))
	assert.Equal(t, whole, bytewise)
	assert.Equal(t, wholeErr == nil, byteErr == nil)
	return whole, wholeErr
}

func TestEvents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		want   []sse.Event
	}{
		{"typed", "event: a\ndata: {\"x\":1}\n\n", []sse.Event{{Type: "a", Data: []byte(`{"x":1}`)}}},
		{"untyped", "data: [DONE]\n\n", []sse.Event{{Data: []byte("[DONE]")}}},
		{"no space after the colon", "event:a\ndata:x\n\n", []sse.Event{{Type: "a", Data: []byte("x")}}},
		{"only one space is dropped", "data:  x\n\n", []sse.Event{{Data: []byte(" x")}}},
		{"comments", ": keep-alive\nevent: a\n: more\ndata: x\n\n:\n\n", []sse.Event{{Type: "a", Data: []byte("x")}}},
		{"multi-line data", "data: one\ndata: two\ndata:\n\n", []sse.Event{{Data: []byte("one\ntwo\n")}}},
		{"CRLF", "event: a\r\ndata: x\r\n\r\nevent: b\r\ndata: y\r\n\r\n", []sse.Event{{Type: "a", Data: []byte("x")}, {Type: "b", Data: []byte("y")}}},
		{"an event without data is none, its type dropped", "event: ping\n\ndata: x\n\n", []sse.Event{{Data: []byte("x")}}},
		{"id, retry and unknown fields", "id: 7\nretry: 10\nfoo: bar\ndata\ndata: x\n\n", []sse.Event{{Data: []byte("\nx")}}},
		{"the last event line wins", "event: a\nevent: b\ndata: x\n\n", []sse.Event{{Type: "b", Data: []byte("x")}}},
		{"blank lines between events", "\n\n\ndata: x\n\n\n\ndata: y\n\n", []sse.Event{{Data: []byte("x")}, {Data: []byte("y")}}},
		{"empty stream", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := all(t, tc.stream, 1<<20)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A stream cut inside an event loses it with an error that matches
// io.ErrUnexpectedEOF; the events before it are read.
func TestCutMidEvent(t *testing.T) {
	for _, cut := range []string{"data: y\n", "data: y", "event: a\n", ": comment\n", "event: a\ndata: y\r\n"} {
		got, err := all(t, "data: x\n\n"+cut, 1<<20)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "%q", cut)
		assert.Equal(t, []sse.Event{{Data: []byte("x")}}, got, "%q", cut)
	}
}

// A read error of the body is returned as it is.
func TestReadError(t *testing.T) {
	boom := errors.New("connection reset")
	rd := sse.NewReader(io.MultiReader(strings.NewReader("data: x\n\ndata: y\n"), iotest.ErrReader(boom)), 1<<20)
	ev, err := rd.Next()
	require.NoError(t, err)
	assert.Equal(t, "x", string(ev.Data))
	_, err = rd.Next()
	assert.Equal(t, boom, err)
}

// An event whose lines pass the bound, one huge line or many small ones
// without the blank line that ends them, fails with session.ErrStreamLimit
// once the bound is passed, having read little past it; an event just
// under the bound is read.
func TestEventBound(t *testing.T) {
	const bound = 256 << 10
	huge := "data: " + strings.Repeat("x", 4*bound) + "\n\n"
	many := strings.Repeat("data: "+strings.Repeat("y", 1000)+"\n", 4*bound/1000)
	for name, stream := range map[string]string{"one huge line": huge, "many lines": many} {
		t.Run(name, func(t *testing.T) {
			r := &countReader{r: strings.NewReader(stream)}
			_, err := sse.NewReader(r, bound).Next()
			require.ErrorIs(t, err, session.ErrStreamLimit)
			assert.Contains(t, err.Error(), "one server-sent event passed 262144 bytes")
			assert.Less(t, r.n, bound+128<<10, "read past the bound")
		})
	}
	fits := "data: " + strings.Repeat("z", bound-len("data: \n\n")) + "\n\n"
	got, err := all(t, fits, bound)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Len(t, got[0].Data, bound-len("data: \n\n"))
}

type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
