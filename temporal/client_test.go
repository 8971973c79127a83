package temporal_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"

	"github.com/agentfsm/agentfsm/temporal"
)

// updater answers each UpdateWorkflow with the next of its errors (nil
// once they are used up), as the update's outcome.
type updater struct {
	errs  []error
	calls []time.Time
}

func (u *updater) UpdateWorkflow(ctx context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	u.calls = append(u.calls, time.Now())
	var err error
	if len(u.errs) > 0 {
		err, u.errs = u.errs[0], u.errs[1:]
	}
	return handle{err}, nil
}

type handle struct{ err error }

func (handle) WorkflowID() string               { return "w" }
func (handle) RunID() string                    { return "r" }
func (handle) UpdateID() string                 { return "u" }
func (h handle) Get(context.Context, any) error { return h.err }

// Issue 27 item 1: a prompt the session refused while it continued as new
// is sent again until a run takes it; any other error is the caller's at
// once.
func TestPromptSendsAgainWhileContinuing(t *testing.T) {
	continuing := sdktemporal.NewApplicationError("continuing as new", "continuing")
	synctest.Test(t, func(t *testing.T) {
		u := &updater{errs: []error{continuing, continuing, nil}}
		require.NoError(t, temporal.Prompt(t.Context(), u, "w", "hi"))
		require.Len(t, u.calls, 3)
		assert.Equal(t, 200*time.Millisecond, u.calls[1].Sub(u.calls[0]))
		assert.Equal(t, 400*time.Millisecond, u.calls[2].Sub(u.calls[1]))

		busy := sdktemporal.NewNonRetryableApplicationError("busy", "busy", nil)
		u = &updater{errs: []error{busy}}
		assert.Equal(t, busy, temporal.Prompt(t.Context(), u, "w", "hi"))
		assert.Len(t, u.calls, 1)

		// A session that keeps refusing is asked less and less often:
		// after 0.2, 0.4, 0.8, 1.6, 3.2 s, then every 5 s.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		u = &updater{errs: slices.Repeat([]error{continuing}, 20)}
		err := temporal.Prompt(ctx, u, "w", "hi")
		assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
		require.Len(t, u.calls, 8, "at 0, 0.2, 0.6, 1.4, 3, 6.2, 11.2, 16.2 s: %v", u.calls)
		var gaps []time.Duration
		for i := 1; i < len(u.calls); i++ {
			gaps = append(gaps, u.calls[i].Sub(u.calls[i-1]))
		}
		assert.Equal(t, []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
			1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}, gaps)
	})
}
