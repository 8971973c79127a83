package temporal_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/temporal"
)

// Each scenario of the shared table gives on the workflow the recovery
// events it gives in process (issue item 3: the transient chain,
// exhaustion, abort during a wait, overflow → compaction → continuation, a
// usage-limit key switch).
func TestScenarios(t *testing.T) {
	for _, sc := range scenarios.All() {
		t.Run(sc.Name, func(t *testing.T) {
			snk, _ := playInSuite(t, sc, &temporal.Workflow{Random: scenarios.Draw})
			assert.Equal(t, sc.Want, snk.recovery(t))
		})
	}
}
