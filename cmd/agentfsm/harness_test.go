package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGuardStartsAfterTheBuild: a test's deadline starts once the binary
// under test is built, not before (a first build on a loaded machine took
// longer than the whole deadline, and failed the test that ran first).
func TestGuardStartsAfterTheBuild(t *testing.T) {
	ctx := guard(t)
	require.False(t, built.IsZero(), "the binary is built before the deadline starts")
	deadline, ok := ctx.Deadline()
	require.True(t, ok)
	assert.False(t, deadline.Add(-60*time.Second).Before(built), "the deadline starts after the build")
}

// TestBinaryUnderTestIsRemoved: the tests leave nothing in the temporary
// directory, not even the directory of the binary they build (some 25 MB
// a run). The child's build is made to fail at once (GOFLAGS=-mod=bogus),
// after its directory is made, so that the check costs no build.
func TestBinaryUnderTestIsRemoved(t *testing.T) {
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestGuardStartsAfterTheBuild$", "-test.count", "1")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "GOFLAGS=-mod=bogus")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "-mod=bogus", "the child's build failed")
	left, err := filepath.Glob(filepath.Join(tmp, "*"))
	require.NoError(t, err)
	for i, p := range left {
		left[i] = strings.TrimPrefix(p, tmp)
	}
	assert.Empty(t, left, "left in TMPDIR")
}
