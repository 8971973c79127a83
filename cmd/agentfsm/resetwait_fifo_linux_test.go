package main

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A FIFO at the wait file's path is refused at once, by name, instead of
// blocking chat on its open before it starts.
func TestWaitFileFIFOIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chat.jsonl.reset-wait")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	_, ok, err := readWaitFile(path)
	assert.False(t, ok)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a regular file")
}
