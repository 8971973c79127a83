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
// refused as "continuing" the first time; each wait after is twice the
// one before, up to promptRetryMax.
const (
	promptRetry    = 200 * time.Millisecond
	promptRetryMax = 5 * time.Second
)

// Prompt sends text to session workflowID as the prompt update and waits
// until the turn settles: it returns nil, or the update's error (an
// application error typed with the turn_settled code, "busy", "closed",
// ...). A prompt the session refused because it was continuing as new
// (type "continuing": it never entered a turn nor the history) is sent
// again to the run that continues it, after 200 ms, then twice as long
// each time up to 5 s (a run waiting for a slow sink before it continues
// refuses for as long), until ctx ends.
func Prompt(ctx context.Context, c Updater, workflowID, text string) error {
	wait := promptRetry
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
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("temporal: prompt to %s: %w (last refused: %v)", workflowID, ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, promptRetryMax)
	}
}
