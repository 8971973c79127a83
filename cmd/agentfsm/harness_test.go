package main

import (
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
// directory, not even the binary they built (some 25 MB a run).
func TestBinaryUnderTestIsRemoved(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.CommandContext(guard(t), os.Args[0], "-test.run", "^TestGuardStartsAfterTheBuild$", "-test.count", "1")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "PASS")
	left, err := filepath.Glob(filepath.Join(tmp, "*"))
	require.NoError(t, err)
	for i, p := range left {
		left[i] = strings.TrimPrefix(p, tmp)
	}
	assert.Empty(t, left, "left in TMPDIR")
}
