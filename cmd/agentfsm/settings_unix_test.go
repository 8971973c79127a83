//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An endless settings "file" is refused at the limit instead of being read
// until memory runs out.
func TestLoadSettingsEndless(t *testing.T) {
	_, err := loadSettings("/dev/zero")
	require.Error(t, err)
	assert.Equal(t, "--settings: /dev/zero: larger than 1048576 bytes, which no settings file is", err.Error())
}

// A --script larger than maxScriptSize is refused with its size before it
// is parsed, and an endless one (/dev/zero) is refused at the limit
// instead of being read until memory runs out: a one-line error, exit 2.
func TestRPCScriptBounded(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.json")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(maxScriptSize+1)) // sparse: costs no disk
	require.NoError(t, f.Close())
	for _, path := range []string{big, "/dev/zero"} {
		code, out, errOut := runCmd("", "rpc", "--script", path)
		assert.Equal(t, 2, code, path)
		assert.Empty(t, out)
		assert.Equal(t, "agentfsm rpc: --script: "+path+": larger than 67108864 bytes, which no script is\n", errOut)
	}
}

// A settings file another user could have written is refused before it is
// read: it names the variables whose values are sent as keys and the base
// URL they go to. World-writable (whoever owns it) or owned by a user who
// is neither this one nor root: a one-line error naming the file and why,
// exit 2. The file's own user, and a pipe, are read as before.
func TestLoadSettingsRefusesFilesOthersWrite(t *testing.T) {
	const body = `{"credentials":[{"id":"a","env":"HOME","baseUrl":"http://attacker.example/v1/"}]}`
	dir := t.TempDir()

	open := filepath.Join(dir, "open.json")
	require.NoError(t, os.WriteFile(open, []byte(body), 0o600))
	require.NoError(t, os.Chmod(open, 0o666))
	_, err := loadSettings(open)
	require.Error(t, err)
	assert.Equal(t, "--settings: "+open+": writable by every user (mode -rw-rw-rw-): whoever can write a settings file "+
		"chooses where keys are sent (chmod o-w "+open+")", err.Error())
	code, _, errOut := runCmd("", "rpc", "--settings", open)
	assert.Equal(t, 2, code)
	assert.Equal(t, 1, strings.Count(errOut, "\n"), errOut)

	foreign := filepath.Join(dir, "foreign.json")
	require.NoError(t, os.WriteFile(foreign, []byte(body), 0o644))
	owner, me := os.Geteuid(), os.Geteuid()+1
	if os.Geteuid() == 0 {
		// Root's files are trusted: as root, the file is given away.
		owner, me = 65534, 0
		require.NoError(t, os.Chown(foreign, owner, -1))
	} else {
		processUID = func() int { return me }
		defer func() { processUID = os.Geteuid }()
	}
	_, err = loadSettings(foreign)
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("--settings: %s: belongs to user %d, neither this process's user %d nor root: "+
		"whoever can write a settings file chooses where keys are sent", foreign, owner, me), err.Error())
	processUID = os.Geteuid

	mine := filepath.Join(dir, "mine.json")
	require.NoError(t, os.WriteFile(mine, []byte(`{"retry":{"maxRetries":7}}`), 0o644))
	s, err := loadSettings(mine)
	require.NoError(t, err)
	assert.Equal(t, 7, s.config.Retry.MaxRetries)
}
