package fsm

import (
	"regexp"
	"slices"
	"testing"

	looplab "github.com/looplab/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/transitions"
)

// TestLooplabEdgesEqualTable reads the edge set back out of looplab's own
// Mermaid rendering of the machine it built and compares it with the table:
// the machine that runs has exactly the table's transitions.
func TestLooplabEdgesEqualTable(t *testing.T) {
	m := Default()
	out, err := looplab.VisualizeForMermaidWithGraphType(m.eng.lf, looplab.StateDiagram)
	require.NoError(t, err)
	edge := regexp.MustCompile(`(?m)^\s+(\w+) --> (\w+): (\w+)$`)
	var got []string
	for _, g := range edge.FindAllStringSubmatch(out, -1) {
		got = append(got, g[1]+" -"+g[3]+"-> "+g[2])
	}
	var want []string
	for _, r := range transitions.Table() {
		for _, from := range r.From {
			if !r.Internal(from) { // an internal rule never moves looplab
				want = append(want, string(from)+" -"+string(r.Trigger)+"-> "+string(r.To))
			}
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	assert.Equal(t, want, got)
}
