package temporal_test

import (
	"testing"

	"go.uber.org/goleak"
)

// A run that continues as new leaves its sink's delivery running, as it
// does on a server (bound_test.go). The test environment cannot end a
// mocked activity whose delay is still running on the clock of a workflow
// that is over: its goroutines, stopped at these three functions of the
// SDK's test environment, are not the package's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("go.temporal.io/sdk/internal.(*testWorkflowEnvironmentImpl).runBeforeMockCallReturns"),
		goleak.IgnoreTopFunction("go.temporal.io/sdk/internal.(*activityExecutorWrapper).Execute"),
		goleak.IgnoreTopFunction("go.temporal.io/sdk/internal.(*testWorkflowEnvironmentImpl).ExecuteActivity.func2"),
	)
}
