package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue item 5: the read-only tools stay within the working directory and
// say why when they cannot answer.
func TestReadOnlyTools(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "work")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("deep"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.txt"), []byte("a"+strings.Repeat("é", maxReadBytes)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bin"), []byte{0xff, 0xfe, 0x00}, 0o644))
	// A large binary file: refused as one, not trimmed a byte at a time.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.bin"), bytes.Repeat([]byte{0xff}, 4*maxReadBytes), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(parent, "outside.txt"), []byte("secret"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(parent, "outside.txt"), filepath.Join(dir, "out-link")))
	require.NoError(t, os.Symlink("sub/b.txt", filepath.Join(dir, "in-link")))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	tools := map[string]tool{}
	for _, tl := range readOnlyTools(root) {
		tools[tl.name] = tl
		var schema map[string]any
		require.NoError(t, json.Unmarshal(tl.schema, &schema), tl.name)
	}
	call := func(name, args string) (string, error) {
		return tools[name].run(context.Background(), json.RawMessage(args))
	}

	out, err := call("read", `{"path":"a.txt"}`)
	require.NoError(t, err)
	assert.Equal(t, "hello", out)
	out, err = call("read", `{"path":"./sub/../sub/b.txt"}`)
	require.NoError(t, err)
	assert.Equal(t, "deep", out)
	out, err = call("read", `{"path":"in-link"}`)
	require.NoError(t, err)
	assert.Equal(t, "deep", out, "a link within the directory is followed")
	out, err = call("read", `{"path":"big.txt"}`)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(out), maxReadBytes+100)
	assert.Contains(t, out, fmt.Sprintf("[... cut at %d bytes of %d]", maxReadBytes-1, 1+2*maxReadBytes), "a rune the cut split is dropped")
	assert.True(t, utf8.ValidString(out))
	out, err = call("list", `{}`)
	require.NoError(t, err)
	assert.Equal(t, "a.txt\nbig.bin\nbig.txt\nbin\nin-link\nout-link\nsub/", out)
	out, err = call("list", `{"path":"sub"}`)
	require.NoError(t, err)
	assert.Equal(t, "b.txt", out)

	for _, c := range []struct{ name, args, want string }{
		{"read", `{"path":"../outside.txt"}`, `"../outside.txt" is outside the working directory`},
		{"read", `{"path":"sub/../../outside.txt"}`, "is outside the working directory"},
		{"read", `{"path":"` + filepath.Join(parent, "outside.txt") + `"}`, "is outside the working directory"},
		{"read", `{"path":"out-link"}`, `"out-link" is outside the working directory`},
		{"list", `{"path":".."}`, "is outside the working directory"},
		{"read", `{"path":"missing.txt"}`, "missing.txt: no such file or directory"},
		{"read", `{"path":"sub"}`, "sub is a directory: use list"},
		{"read", `{"path":"bin"}`, "bin is not a text file"},
		{"read", `{"path":"big.bin"}`, "big.bin is not a text file"},
		{"read", `{}`, `"path" is required`},
		{"read", `{"path":7}`, "the arguments are not"},
		{"read", `[]`, "the arguments are not"},
		{"list", `{"path":"a.txt"}`, "a.txt is not a directory: use read"},
	} {
		_, err := call(c.name, c.args)
		require.Error(t, err, c.args)
		assert.Contains(t, err.Error(), c.want, c.args)
		if !strings.Contains(c.args, parent) {
			assert.NotContains(t, err.Error(), parent, "no absolute path of the machine in a result")
		}
	}
}
