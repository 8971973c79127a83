package temporal_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/temporal"
)

// The workflow replays the histories recorded on a real server (go run
// ./cmd/record) for every scenario: a change to the workflow or to the
// engine that makes it take other steps on the same history fails here.
func TestReplayRecordedHistories(t *testing.T) {
	for _, sc := range scenarios.All() {
		t.Run(sc.Name, func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			(&temporal.Workflow{}).Register(r)
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, filepath.Join("testdata", "histories", sc.Name+".json")))
		})
	}
}
