package temporal_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/temporal"
)

// historiesDir holds the recorded histories: one directory per release of
// the workflow (v1, v2, ...), each holding the histories that release
// recorded on a real server (go run ./cmd/record -out
// testdata/histories/vN). A directory is kept while workflows that
// release started may still be open (docs/temporal.md, "Upgrades").
var historiesDir = filepath.Join("testdata", "histories")

// The workflow replays every history every release recorded: a change to
// the workflow or to the engine that makes it take other steps on a
// history of an earlier release (a command added, removed or reordered
// without workflow.GetVersion) fails here, before it reaches the sessions
// that release left open.
func TestReplayRecordedHistories(t *testing.T) {
	releases, err := os.ReadDir(historiesDir)
	require.NoError(t, err)
	replayed := map[string]bool{}
	for _, rel := range releases {
		require.True(t, rel.IsDir(), "%s: only release directories belong in %s", rel.Name(), historiesDir)
		files, err := filepath.Glob(filepath.Join(historiesDir, rel.Name(), "*.json"))
		require.NoError(t, err)
		require.NotEmpty(t, files, "release %s recorded no history", rel.Name())
		for _, path := range files {
			name := strings.TrimSuffix(filepath.Base(path), ".json")
			replayed[name] = true
			t.Run(rel.Name()+"/"+name, func(t *testing.T) {
				r := worker.NewWorkflowReplayer()
				recordedWith(name).Register(r)
				require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, path))
			})
		}
	}
	// Every scenario of the shared table has a recorded history in some
	// release.
	for _, sc := range scenarios.All() {
		require.True(t, replayed[sc.Name], "no release recorded a history of scenario %s", sc.Name)
	}
}

// recordedWith is the worker's settings a recorded history ran under: the
// settings are the worker's, not the history's, and a replay takes the
// same steps only under the same ones (cmd/record's stories).
func recordedWith(name string) *temporal.Workflow {
	if strings.HasPrefix(name, "continue-as-new") {
		return &temporal.Workflow{MaxInputs: 1}
	}
	return &temporal.Workflow{}
}
