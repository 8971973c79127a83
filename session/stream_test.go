package session_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/session"
)

// readStream reads body through LimitEventStream with the limits given,
// one byte at a time when bytewise (so every line end is split), and
// returns what was read and the error that ended it (nil at io.EOF).
func readStream(t *testing.T, status int, body string, maxEvent, maxBody int64, bytewise bool) (string, error) {
	t.Helper()
	var r io.Reader = strings.NewReader(body)
	if bytewise {
		r = iotest.OneByteReader(r)
	}
	resp := &http.Response{StatusCode: status, Body: io.NopCloser(r)}
	session.LimitEventStream(resp, maxEvent, maxBody)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	return string(got), err
}

func TestLimitEventStream(t *testing.T) {
	events := strings.Repeat("event: e\ndata: 0123456789\n\n", 10) // 27 bytes each
	for _, bytewise := range []bool{false, true} {
		// Events under the limit pass whatever their number, "\n\n",
		// "\r\n\r\n" and "\n\r\n" all ending one.
		crlf := strings.ReplaceAll(events, "\n", "\r\n")
		mixed := strings.ReplaceAll(events, "\n\n", "\n\r\n")
		for _, body := range []string{events, crlf, mixed} {
			got, err := readStream(t, 200, body, 40, 1<<20, bytewise)
			assert.NoError(t, err)
			assert.Equal(t, body, got)
		}

		// Data lines that never end their event fail once past the limit.
		endless := "data: 0123456789\n" + strings.Repeat("data: x\n", 100)
		got, err := readStream(t, 200, endless, 40, 1<<20, bytewise)
		require.ErrorIs(t, err, session.ErrStreamLimit)
		assert.EqualError(t, err, "session: the server's stream broke a size limit: one server-sent event passed 40 bytes without the blank line that ends it (session.MaxStreamEvent)")
		if bytewise {
			assert.Equal(t, 41, len(got), "the read past the limit")
		}

		// A lone "\r" is no line end (as the SDKs read), nor "\r\r".
		got, err = readStream(t, 200, strings.Repeat("data: x\r\r", 20), 40, 1<<20, bytewise)
		assert.ErrorIs(t, err, session.ErrStreamLimit)
		if bytewise {
			assert.Equal(t, 41, len(got))
		}

		// The whole stream is bounded too, its events small.
		_, err = readStream(t, 200, events+events, 40, 300, bytewise)
		require.ErrorIs(t, err, session.ErrStreamLimit)
		assert.EqualError(t, err, "session: the server's stream broke a size limit: the answer's stream passed 300 bytes (session.MaxStreamBody)")

		// An error response is LimitErrorBody's business.
		got, err = readStream(t, 400, endless, 40, 1<<20, bytewise)
		assert.NoError(t, err)
		assert.Equal(t, endless, got)
	}
	// The default limits are whole MiB, and say so.
	resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("data: " + strings.Repeat("x", session.MaxStreamEvent)))}
	session.LimitEventStream(resp, session.MaxStreamEvent, session.MaxStreamBody)
	_, err := io.ReadAll(resp.Body)
	assert.ErrorContains(t, err, "passed 8 MiB without")
	session.LimitEventStream(nil, 1, 1) // no panic

	// The classifier takes the failure as fatal under both rule sets: the
	// same server would send the same stream.
	for _, rules := range []classify.Rules{classify.Seed, classify.Extended} {
		m := session.FailedMessage(0, nil, nil, err)
		got := rules.Classify(classify.Message{StopReason: m.StopReason, ErrorMessage: m.ErrorMessage, Err: m.Err}, time.Time{})
		assert.Equal(t, classify.Fatal, got.Class, "%v", errors.Unwrap(err))
	}
}
