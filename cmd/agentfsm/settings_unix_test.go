//go:build unix

package main

import (
	"os"
	"path/filepath"
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
