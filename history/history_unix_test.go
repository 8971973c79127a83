//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package history_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentfsm/agentfsm/history"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A history file is created readable by its owner only (issue item 22).
func TestFileHistoryCreatedPrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	defer h.Close()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// Anything but a regular file is refused at once, with an error naming
// the file: a FIFO would block the open forever, /dev/zero would be read
// until memory runs out (issue item 22).
func TestFileHistoryRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	toZero := filepath.Join(dir, "zero-link")
	require.NoError(t, os.Symlink("/dev/zero", toZero))
	for path, what := range map[string]string{
		fifo:        "named pipe",
		"/dev/zero": "device",
		toZero:      "device",
		dir:         "directory",
	} {
		h, err := history.OpenFileHistory(path)
		if !assert.Error(t, err, path) {
			h.Close()
			continue
		}
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), what)
	}
}

// A second FileHistory on a file already open in the process is refused,
// naming the file; closing the first lets the file be opened again
// (issue item 21).
func TestFileHistoryOneWriterInProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	require.NoError(t, h.Append(msgEntry("a", "first")))

	_, err = history.OpenFileHistory(path)
	require.ErrorIs(t, err, history.ErrHistoryLocked)
	assert.Contains(t, err.Error(), path)
	link := filepath.Join(t.TempDir(), "link.jsonl")
	require.NoError(t, os.Symlink(path, link))
	_, err = history.OpenFileHistory(link)
	require.ErrorIs(t, err, history.ErrHistoryLocked, "the same file under another name")

	require.NoError(t, h.Append(msgEntry("b", "second")), "the refused opener changed nothing")
	require.NoError(t, h.Close())
	h, err = history.OpenFileHistory(path)
	require.NoError(t, err, "Close releases the lock")
	defer h.Close()
	assert.Len(t, readAll(t, h), 2)
}

// Appends land at the end of the file even when something else wrote
// there meanwhile (a writer that ignores the lock).
func TestFileHistoryAppendsAtTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	require.NoError(t, h.Append(msgEntry("a", "first")))
	other, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = other.WriteString(`{"type":"message","id":"x","timestamp":1,"message":{"id":"x","role":"user","timestamp":1}}` + "\n")
	require.NoError(t, err)
	require.NoError(t, other.Close())
	require.NoError(t, h.Append(msgEntry("b", "second")))
	require.NoError(t, h.Close())

	h, err = history.OpenFileHistory(path)
	require.NoError(t, err)
	defer h.Close()
	var ids []string
	for _, e := range readAll(t, h) {
		ids = append(ids, e.ID)
	}
	assert.Equal(t, []string{"a", "x", "b"}, ids)
}

// historyHolderEnv makes the test binary, run again by
// TestFileHistoryOneWriterAcrossProcesses, the other process: "hold:PATH"
// opens PATH, appends an entry, says "opened" and holds the file until its
// standard input closes; "open:PATH" tries to open PATH and prints the
// error.
const historyHolderEnv = "AGENTFSM_TEST_HISTORY_PROCESS"

// Two processes on one history file: whichever opens it second is refused
// with an error naming the file, until the first closes it (issue item 21).
func TestFileHistoryOneWriterAcrossProcesses(t *testing.T) {
	if mode, path, ok := strings.Cut(os.Getenv(historyHolderEnv), ":"); ok {
		otherProcess(mode, path)
		return
	}
	path := filepath.Join(t.TempDir(), "h.jsonl")
	other := func(mode string) (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFileHistoryOneWriterAcrossProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), historyHolderEnv+"="+mode+":"+path)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		return cmd, stdin, bufio.NewScanner(stdout)
	}
	// readReport returns the other process's report line.
	readReport := func(sc *bufio.Scanner) string {
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "report: "); ok {
				return line
			}
		}
		return "no report"
	}

	// The other process holds the file: this one is refused.
	cmd, stdin, out := other("hold")
	require.Equal(t, "opened", readReport(out))
	_, err := history.OpenFileHistory(path)
	require.ErrorIs(t, err, history.ErrHistoryLocked)
	assert.Contains(t, err.Error(), path)
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait())

	// This process holds the file: the other one is refused.
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err, "the other process's exit released the file")
	defer h.Close()
	assert.Len(t, readAll(t, h), 1, "the other process's entry")
	cmd, stdin, out = other("open")
	report := readReport(out)
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait())
	assert.Contains(t, report, history.ErrHistoryLocked.Error())
	assert.Contains(t, report, path)
}

func otherProcess(mode, path string) {
	h, err := history.OpenFileHistory(path)
	if err != nil {
		os.Stdout.WriteString("report: " + err.Error() + "\n")
		return
	}
	defer h.Close()
	if mode == "hold" {
		if err := h.Append(msgEntry("held", "from the other process")); err != nil {
			os.Stdout.WriteString("report: " + err.Error() + "\n")
			return
		}
	}
	os.Stdout.WriteString("report: opened\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// A file replaced under an open FileHistory (an editor saves by renaming a
// new file over the path) or deleted: an append would go to a file no name
// reaches, lost on reopening. It is refused with an error naming the file,
// and the file the path names now is left as it is.
func TestFileHistoryRefusesAppendToAReplacedFile(t *testing.T) {
	for _, how := range []string{"replaced", "deleted", "moved"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "h.jsonl")
			h, err := history.OpenFileHistory(path)
			require.NoError(t, err)
			defer h.Close()
			require.NoError(t, h.Append(msgEntry("a", "first")))
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			switch how {
			case "replaced":
				edited := filepath.Join(dir, "h.jsonl~")
				require.NoError(t, os.WriteFile(edited, data, 0o600))
				require.NoError(t, os.Rename(edited, path))
			case "deleted":
				require.NoError(t, os.Remove(path))
			case "moved":
				require.NoError(t, os.Rename(path, filepath.Join(dir, "elsewhere.jsonl")))
			}
			err = h.Append(msgEntry("b", "second"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			if how == "replaced" {
				after, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.Equal(t, string(data), string(after))
			}
		})
	}
}

// Changing directory after opening a history by a relative path does not
// make its appends refused: the path is checked as it was when opened.
func TestFileHistoryRelativePathSurvivesChdir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	h, err := history.OpenFileHistory("h.jsonl")
	require.NoError(t, err)
	defer h.Close()
	t.Chdir(t.TempDir())
	require.NoError(t, h.Append(msgEntry("a", "first")))
}
