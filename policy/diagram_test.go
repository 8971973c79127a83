package policy_test

import (
	"flag"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/policy"
)

var update = flag.Bool("update", false, "rewrite the generated block of docs/session.md")

const sessionDoc = "../docs/session.md"

// engineDiagram draws the engine between its inputs and its effects, as a
// Mermaid flowchart generated from the code: the inputs are the Engine's
// methods that answer with effects, the effects are EffectKinds.
func engineDiagram() string {
	effects := reflect.TypeFor[[]policy.Effect]()
	var inputs []string
	t := reflect.TypeFor[*policy.Engine]()
	for i := range t.NumMethod() {
		m := t.Method(i)
		for j := range m.Type.NumOut() {
			if m.Type.Out(j) == effects {
				inputs = append(inputs, m.Name)
			}
		}
	}
	var b strings.Builder
	b.WriteString("```mermaid\nflowchart LR\n")
	b.WriteString("    subgraph inputs [\"inputs (each with its time)\"]\n        direction TB\n")
	for _, in := range inputs {
		b.WriteString("        in_" + in + "[" + in + "]\n")
	}
	b.WriteString("    end\n")
	b.WriteString("    engine{{\"policy.Engine: the machine, the counter, the episode, the runtime context, the backoff, the compaction, the turn\"}}\n")
	b.WriteString("    subgraph effects [\"effects (carried out by a driver)\"]\n        direction TB\n")
	for _, k := range policy.EffectKinds() {
		b.WriteString("        ef_" + k.String() + "[" + k.String() + "]\n")
	}
	b.WriteString("    end\n")
	b.WriteString("    inputs --> engine --> effects\n")
	b.WriteString("    effects -. \"Appended, UsageLimitAnswered, RunEvent, RunReturned, TimerFired, CompactionFinished\" .-> inputs\n")
	b.WriteString("```\n")
	return b.String()
}

var engineBlock = regexp.MustCompile(`(?s)(<!-- generated:engine begin -->\n).*?(<!-- generated:engine end -->)`)

// TestEngineDiagramIsCurrent checks the diagram in docs/session.md against
// the code; go test ./policy -update rewrites it.
func TestEngineDiagramIsCurrent(t *testing.T) {
	doc, err := os.ReadFile(sessionDoc)
	require.NoError(t, err)
	require.True(t, engineBlock.Match(doc), "docs/session.md has no generated:engine block")
	want := engineBlock.ReplaceAll(doc, []byte("${1}"+strings.ReplaceAll(engineDiagram(), "$", "$$")+"${2}"))
	if *update {
		require.NoError(t, os.WriteFile(sessionDoc, want, 0o644))
		return
	}
	require.Equal(t, string(want), string(doc), "docs/session.md's engine diagram is stale: run go test ./policy -update")
}
