package fsm_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/fsm/svg"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

var update = flag.Bool("update", false, "rewrite the generated diagrams and documentation blocks")

// The files generated from the table, relative to this package.
const (
	dotFile   = "../docs/state-machine.dot"
	svgFile   = "../docs/state-machine.svg"
	mdFile    = "../docs/state-machine.md"
	readmeMD  = "../README.md"
	mermaidID = "mermaid"
	rulesID   = "rules"
	actionsID = "actions"
)

// blocks returns what each generated block of a Markdown file must hold.
func blocks() map[string]string {
	rules := transitions.Table()
	return map[string]string{
		mermaidID: "```mermaid\n" + fsm.Mermaid(rules) + "```\n",
		rulesID:   rulesMarkdown(rules),
		actionsID: actionsMarkdown(rules),
	}
}

var blockRE = regexp.MustCompile(`(?s)(<!-- generated:(\w+) begin -->\n)(.*?)(<!-- generated:\w+ end -->)`)

// fillBlocks replaces the body of every generated block in doc. It reports
// the names of blocks it found.
func fillBlocks(t *testing.T, doc []byte) ([]byte, []string) {
	want := blocks()
	var found []string
	out := blockRE.ReplaceAllFunc(doc, func(m []byte) []byte {
		g := blockRE.FindSubmatch(m)
		name := string(g[2])
		body, ok := want[name]
		if !ok {
			t.Errorf("unknown generated block %q", name)
			return m
		}
		found = append(found, name)
		return []byte(string(g[1]) + body + string(g[4]))
	})
	return out, found
}

// checkFile compares path with want, or rewrites it under -update.
func checkFile(t *testing.T, path string, want []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, want, 0o644))
		return
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err, "run: go test ./fsm -update")
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run go test ./fsm -update", filepath.Clean(path))
	}
}

func TestGeneratedFilesAreCurrent(t *testing.T) {
	rules := transitions.Table()
	checkFile(t, dotFile, []byte(fsm.DOT(rules)))

	image, err := svg.Render(context.Background(), rules)
	require.NoError(t, err)
	checkFile(t, svgFile, image)

	for _, path := range []string{mdFile, readmeMD} {
		doc, err := os.ReadFile(path)
		require.NoError(t, err)
		filled, found := fillBlocks(t, doc)
		assert.Contains(t, found, mermaidID, "%s embeds no generated Mermaid diagram", path)
		checkFile(t, path, filled)
	}
}

// TestRenamedTriggerMakesDiagramsStale checks that the golden comparison bites:
// a table with one trigger renamed renders differently in every format.
func TestRenamedTriggerMakesDiagramsStale(t *testing.T) {
	rules := transitions.Table()
	renamed := transitions.Table()
	renamed[1].Trigger = "try_again"
	assert.NotEqual(t, fsm.Mermaid(rules), fsm.Mermaid(renamed))
	assert.NotEqual(t, fsm.DOT(rules), fsm.DOT(renamed))
	assert.NotEqual(t, rulesMarkdown(rules), rulesMarkdown(renamed))
	a, err := svg.Render(context.Background(), rules)
	require.NoError(t, err)
	b, err := svg.Render(context.Background(), renamed)
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	assert.Contains(t, string(b), "try_again")
}

func TestDiagramsNameEveryStateTriggerAndGuard(t *testing.T) {
	rules := transitions.Table()
	image, err := svg.Render(context.Background(), rules)
	require.NoError(t, err)
	for name, out := range map[string]string{"mermaid": fsm.Mermaid(rules), "dot": fsm.DOT(rules), "svg": string(image)} {
		for _, s := range states.All() {
			assert.Contains(t, out, string(s), "%s lacks state %s", name, s)
		}
		for _, r := range rules {
			for _, from := range r.From {
				var edge string
				to := r.Target(from)
				switch name {
				case "mermaid":
					edge = fmt.Sprintf("%s --> %s: %s\n", from, to, fsm.Label(r, " "))
				case "dot":
					edge = fmt.Sprintf(`%s -> %s [label="%s"]`, from, to, fsm.Label(r, `\n`))
				case "svg":
					edge = fmt.Sprintf("<title>%s&#45;&gt;%s</title>", from, to)
				}
				assert.Contains(t, out, edge, "%s lacks edge %s from %s", name, r.Trigger, from)
			}
			assert.Contains(t, out, r.Guard.Name, "%s lacks guard %s", name, r.Guard.Name)
			for _, a := range r.Actions {
				if name != "svg" { // the SVG escapes parentheses and commas its own way
					assert.Contains(t, out, string(a), "%s lacks action %s", name, a)
				}
			}
		}
	}
}

func TestDiagramsAreDeterministic(t *testing.T) {
	rules := transitions.Table()
	a, err := svg.Render(context.Background(), rules)
	require.NoError(t, err)
	b, err := svg.Render(context.Background(), rules)
	require.NoError(t, err)
	assert.Equal(t, a, b)
	assert.Equal(t, fsm.Mermaid(rules), fsm.Mermaid(transitions.Table()))
	assert.True(t, strings.HasPrefix(fsm.Mermaid(rules), "stateDiagram-v2\n"))
}

// rulesMarkdown renders rules as a Markdown table: trigger, source states,
// destination, guard name and what the guard means. The documentation embeds
// it (the generated block "rules") so that the prose table is the running
// one.
func rulesMarkdown(rules []transitions.Rule) string {
	var b strings.Builder
	b.WriteString("| trigger | from | to | guard | holds when | actions |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, r := range rules {
		from := make([]string, len(r.From))
		for i, s := range r.From {
			from[i] = "`" + string(s) + "`"
		}
		to := "`" + string(r.To) + "`"
		if r.To == transitions.Stay {
			to = "(stays)"
		}
		acts := make([]string, len(r.Actions))
		for i, a := range r.Actions {
			acts[i] = "`" + string(a) + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | `%s` | %s | %s |\n",
			r.Trigger, strings.Join(from, ", "), to, r.Guard.Name, strings.ReplaceAll(r.Guard.Doc, "|", `\|`), strings.Join(acts, ", "))
	}
	return b.String()
}

// actionsMarkdown lists every action the rules use, in the order of
// transitions.Actions, with what it does.
func actionsMarkdown(rules []transitions.Rule) string {
	used := map[transitions.Action]bool{}
	for _, r := range rules {
		for _, a := range r.Actions {
			used[a] = true
		}
	}
	var b strings.Builder
	b.WriteString("| action | what it does |\n")
	b.WriteString("|---|---|\n")
	for _, a := range transitions.Actions() {
		if used[a] {
			fmt.Fprintf(&b, "| `%s` | %s |\n", a, strings.ReplaceAll(a.Doc(), "|", `\|`))
		}
	}
	return b.String()
}
