package scenarios_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentfsm/agentfsm/internal/scenarios"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each scenario gives its recovery events on the in-process session; the
// temporal module's tests hold the workflow to the same lines.
func TestInProcess(t *testing.T) {
	for _, sc := range scenarios.All() {
		t.Run(sc.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got, err := sc.Play(context.Background())
				require.NoError(t, err)
				assert.Equal(t, sc.Want, got)
			})
		})
	}
}
