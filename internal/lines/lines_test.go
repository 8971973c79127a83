package lines_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/internal/lines"
)

func TestReader(t *testing.T) {
	long := strings.Repeat("y", 200<<10) // longer than the reader's buffer
	lr := lines.NewReader(strings.NewReader("short\n"+strings.Repeat("y", 100)+"\nnext\r\n\n"+long[:50]+"\nlast"), 60)
	var got []string
	for {
		line, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, lines.ErrTooLong) {
			got = append(got, "<too long>")
			continue
		}
		require.NoError(t, err)
		got = append(got, string(line))
	}
	assert.Equal(t, []string{"short", "<too long>", "next", "", long[:50], "last"}, got)

	lr = lines.NewReader(strings.NewReader(long+"\nafter\n"), len(long))
	line, err := lr.Next()
	require.NoError(t, err)
	assert.Len(t, line, len(long), "a line longer than the buffer comes whole")
	line, err = lr.Next()
	require.NoError(t, err)
	assert.Equal(t, "after", string(line))
	_, err = lr.Next()
	assert.ErrorIs(t, err, io.EOF)
}
