package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// runCmd runs the command in process and returns its exit code and outputs.
func runCmd(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &environment{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, now: time.Now})
	return code, out.String(), errOut.String()
}

func TestHelpListsSubcommands(t *testing.T) {
	for _, flag := range []string{"-h", "--help", "help"} {
		code, out, _ := runCmd("", flag)
		assert.Equal(t, 0, code)
		for _, c := range commands() {
			assert.Contains(t, out, c.name)
		}
	}
	code, _, errOut := runCmd("", "fly")
	assert.Equal(t, 2, code)
	assert.Equal(t, "agentfsm: unknown subcommand \"fly\" (run agentfsm -h for the list)\n", errOut)
}

func TestDiagramFormats(t *testing.T) {
	rules := transitions.Table()
	code, out, _ := runCmd("", "diagram", "--format", "mermaid")
	assert.Equal(t, 0, code)
	assert.Equal(t, fsm.Mermaid(rules), out)
	for _, s := range states.All() {
		assert.Contains(t, out, string(s))
	}
	for _, r := range rules {
		assert.Contains(t, out, string(r.Trigger)+" ["+r.Guard.Name+"]")
	}

	code, out, _ = runCmd("", "diagram")
	assert.Equal(t, 0, code)
	assert.Equal(t, fsm.Mermaid(rules), out, "mermaid is the default")

	code, out, _ = runCmd("", "diagram", "--format=dot")
	assert.Equal(t, 0, code)
	assert.Equal(t, fsm.DOT(rules), out)

	checkSVGDiagram(t, func() (int, string, string) { return runCmd("", "diagram", "-format", "svg") })
}

// checkSVGDiagram runs diagram --format svg: built with the tag svg, it
// prints the SVG; without it, it prints nothing on stdout, exits 1 and
// says on stderr, in one line, the two ways to get the SVG.
func checkSVGDiagram(t *testing.T, run func() (code int, stdout, stderr string)) {
	t.Helper()
	code, out, errOut := run()
	if svgBuilt {
		assert.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "<svg")
		assert.Contains(t, out, "</svg>")
		assert.Empty(t, errOut)
		return
	}
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, "agentfsm diagram: "+errNoSVG.Error()+"\n", errOut)
	assert.Contains(t, errOut, "agentfsm diagram --format dot | dot -Tsvg")
	assert.Contains(t, errOut, "go build -tags svg ./cmd/agentfsm")
}

func TestDiagramBadInput(t *testing.T) {
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"diagram", "--format", "png"}, `unknown --format "png"`},
		{[]string{"diagram", "--colour"}, "flag provided but not defined: -colour"},
		{[]string{"diagram", "extra"}, `unexpected argument "extra"`},
		{[]string{"diagram", "--format"}, "flag needs an argument"},
	}
	for _, c := range cases {
		code, out, errOut := runCmd("", c.args...)
		assert.Equal(t, 2, code, c.args)
		assert.Empty(t, out, c.args)
		assert.Contains(t, errOut, c.says, c.args)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
		assert.NotContains(t, errOut, "goroutine")
	}
	code, out, _ := runCmd("", "diagram", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "usage: agentfsm diagram")
	assert.Contains(t, out, "--format")
}

// TestInteractiveNeedsTerminals: only a terminal on both ends starts the
// terminal view; /dev/null, a pipe and a file are not terminals.
// Issue item 17.
func TestInteractiveNeedsTerminals(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	require.NoError(t, err)
	defer null.Close()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer file.Close()
	for _, f := range []*os.File{null, r, w, file} {
		assert.False(t, isTerminal(f), f.Name())
		assert.False(t, interactive(&environment{stdin: f, stdout: f}), f.Name())
	}
	assert.False(t, isTerminal(strings.NewReader("")))
}

// TestDefaultSubcommandFlags: the demo is the default subcommand, so its
// flags work without its name. Issue item 18.
func TestDefaultSubcommandFlags(t *testing.T) {
	code, out, errOut := runCmd("", "--list")
	assert.Equal(t, 0, code, errOut)
	for _, sc := range scenarios(demoBaseDelayMs) {
		assert.Contains(t, out, sc.name)
	}
	code2, out2, _ := runCmd("", "demo", "--list")
	assert.Equal(t, code2, code)
	assert.Equal(t, out2, out)

	code, out, errOut = runCmd("", "--scenario", "transient", "--base-delay-ms", "0")
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "outcome: transient: succeeded, 2 retries")
	assert.NotContains(t, out, "== exhausted")

	code, out, errOut = runCmd("", "-scenario=nope")
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Equal(t, "agentfsm demo: unknown --scenario \"nope\" (run agentfsm demo --list)\n", errOut)

	code, _, errOut = runCmd("", "--colour")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "agentfsm demo: flag provided but not defined: -colour")
	assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
}

// failWriter fails every write, as stdout on a full disk or a closed pipe.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestDiagramStdoutFails: a diagram that cannot be written is exit 1 with a
// one-line reason, not a silent success.
func TestDiagramStdoutFails(t *testing.T) {
	for _, format := range []string{"mermaid", "dot"} {
		var errOut bytes.Buffer
		code := run([]string{"diagram", "--format", format}, &environment{stdin: strings.NewReader(""), stdout: failWriter{}, stderr: &errOut, now: time.Now})
		assert.Equal(t, 1, code, format)
		assert.Equal(t, "agentfsm diagram: writing the diagram: no space left on device\n", errOut.String(), format)
	}
}

// TestHelpSaysWhatTheReferenceIs: the help texts that offer the
// reference's policy or its seed rules say what they are; classify's says
// its exit status. Issue 26 items 4 and 5.
func TestHelpSaysWhatTheReferenceIs(t *testing.T) {
	for _, sub := range []string{"chat", "rpc", "classify"} {
		code, out, _ := runCmd("", sub, "-h")
		require.Equal(t, 0, code)
		text := strings.Join(strings.Fields(out), " ")
		assert.Contains(t, text, "the pi coding agent's AgentSession", sub)
		assert.Contains(t, text, "agentfsm ports", sub)
	}
	_, out, _ := runCmd("", "classify", "-h")
	assert.Contains(t, out, "The exit status is 1 when any line was refused")
	_, out, _ = runCmd("", "chat", "-h")
	assert.Contains(t, out, "--quiet")
}
