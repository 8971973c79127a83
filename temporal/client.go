package temporal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
)

// Updater is the part of a client.Client that Prompt uses.
type Updater interface {
	UpdateWorkflow(ctx context.Context, options client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error)
}

// promptRetry is how long Prompt waits before it sends again a prompt
// refused as "continuing".
const promptRetry = 200 * time.Millisecond

// Prompt sends text to session workflowID as the prompt update and waits
// until the turn settles: it returns nil, or the update's error (an
// application error typed with the turn_settled code, "busy", "closed",
// ...). A prompt the session refused because it was continuing as new
// (type "continuing": it never entered a turn nor the history) is sent
// again, every 200 ms, to the run that continues it, until ctx ends.
func Prompt(ctx context.Context, c Updater, workflowID, text string) error {
	for {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: workflowID, UpdateName: UpdatePrompt, Args: []any{text},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		var app *sdktemporal.ApplicationError
		if !errors.As(err, &app) || app.Type() != codeContinuing {
			return err
		}
		t := time.NewTimer(promptRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("temporal: prompt to %s: %w (last refused: %v)", workflowID, ctx.Err(), err)
		case <-t.C:
		}
	}
}
