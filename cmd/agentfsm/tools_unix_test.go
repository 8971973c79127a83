//go:build unix

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue item 5: reading a named pipe no one writes to would block the turn
// in its open; the read tool refuses what is not a regular file.
func TestReadToolRefusesAPipe(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	read := readOnlyTools(root)[0]
	require.Equal(t, "read", read.name)
	_, err = read.run(context.Background(), json.RawMessage(`{"path":"pipe"}`))
	assert.EqualError(t, err, "pipe is not a regular file")
}
