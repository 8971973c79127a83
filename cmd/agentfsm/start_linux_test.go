package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wazeroVersion is the version of wazero that the command links when built
// with the tag svg, which names the directory of its compilation cache:
// the test binary's own when it links wazero, go.mod's otherwise.
func wazeroVersion(t *testing.T) string {
	info, ok := debug.ReadBuildInfo()
	require.True(t, ok)
	for _, m := range info.Deps {
		if m.Path == "github.com/tetratelabs/wazero" {
			return m.Version
		}
	}
	mod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/tetratelabs/wazero" {
			return f[1]
		}
	}
	t.Fatal("wazero is neither linked into the test nor required by go.mod")
	return ""
}

// TestStartsWithForeignTMPDIR: the binary starts, whatever is in TMPDIR,
// for every subcommand. Upstream go-graphviz compiled Graphviz in its init,
// with a compilation cache in $TMPDIR/go-graphviz: on a shared machine the
// second user's every run panicked before main, "permission denied" on the
// first user's cache. Here that cache is made unwritable for anyone, root
// included (its directory is /proc/self, where no file can be made): each
// subcommand still runs, nothing is written to TMPDIR, not even by the SVG
// diagram, which compiles Graphviz in memory when it is asked for.
// Issue "Reliability and security, round two", item 1.
func TestStartsWithForeignTMPDIR(t *testing.T) {
	bin := binary(t)
	for name, setup := range map[string]func(t *testing.T, tmp string){
		"empty": func(*testing.T, string) {},
		"another user's cache": func(t *testing.T, tmp string) {
			cache := filepath.Join(tmp, "go-graphviz")
			require.NoError(t, os.Mkdir(cache, 0o755))
			version := "wazero-" + wazeroVersion(t) + "-" + runtime.GOARCH + "-" + runtime.GOOS
			require.NoError(t, os.Symlink("/proc/self", filepath.Join(cache, version)))
		},
		"a file": func(t *testing.T, tmp string) {
			require.NoError(t, os.WriteFile(filepath.Join(tmp, "go-graphviz"), []byte("not a directory"), 0o644))
		},
	} {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			setup(t, tmp)
			before := listTree(t, tmp)
			env := append(os.Environ(), "TMPDIR="+tmp)

			cmd := exec.CommandContext(guard(t), bin, "classify")
			cmd.Env = env
			cmd.Stdin = strings.NewReader("503 Service Unavailable\n")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Equal(t, `{"class":"retryable"}`+"\n", string(out))

			cmd = exec.CommandContext(guard(t), bin, "diagram", "--format", "dot")
			cmd.Env = env
			out, err = cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.True(t, strings.HasPrefix(string(out), "digraph"), "%s", out)

			checkSVGDiagram(t, func() (int, string, string) {
				cmd := exec.CommandContext(guard(t), bin, "diagram", "--format", "svg")
				cmd.Env = env
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				var exit *exec.ExitError
				if err != nil && !errors.As(err, &exit) {
					require.NoError(t, err)
				}
				return cmd.ProcessState.ExitCode(), string(out), stderr.String()
			})

			assert.Equal(t, before, listTree(t, tmp), "TMPDIR changed")
		})
	}
}

// listTree lists the paths under dir, with each one's kind.
func listTree(t *testing.T, dir string) []string {
	var paths []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p+" "+d.Type().String())
		return nil
	}))
	return paths
}
