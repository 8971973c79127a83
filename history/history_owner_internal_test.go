//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package history

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A history file another user owns is refused without being read or
// written: another user of the machine could have created it, readable by
// them, where the session's file was to be (in /tmp, say), to read the
// conversation appended to it. The error names the file and both users.
// The file here is the test's own; processUID pretends the process is
// another user's.
func TestFileHistoryRefusesForeignOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	require.NoError(t, os.WriteFile(path, nil, 0o666))
	me := os.Geteuid()
	processUID = func() int { return me + 1 }
	defer func() { processUID = os.Geteuid }()

	h, err := OpenFileHistory(path)
	require.Error(t, err)
	assert.Nil(t, h)
	assert.Equal(t, fmt.Sprintf("history: history %s belongs to user %d, not to this process's user %d: "+
		"its owner could read the conversation written to it", path, me, me+1), err.Error())
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Zero(t, fi.Size(), "nothing written")

	processUID = os.Geteuid
	h, err = OpenFileHistory(path)
	require.NoError(t, err, "the owner opens it")
	require.NoError(t, h.Close())
}
