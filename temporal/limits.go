package temporal

import (
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// DefaultMaxPayload is the default of Workflow.MaxPayload and
// Activities.MaxPayload, in bytes: under the 2 MiB a Temporal server
// refuses a payload above by default (its blob size limit), with room for
// the payload's metadata.
const DefaultMaxPayload = 2_000_000

// ErrPayloadTooLarge is the error a *PayloadTooLargeError matches.
var ErrPayloadTooLarge = errors.New("temporal: payload too large")

// PayloadTooLargeError is the error of a turn whose run's input or result
// is larger than the limit (Workflow.MaxPayload, Activities.MaxPayload):
// sent as it is, the server would refuse it, and a workflow task the
// server refuses is made again and again, with no turn_settled. The turn
// fails with it instead; its turn_settled code is "payload_too_large".
type PayloadTooLargeError struct {
	// What names the payload: "the run's input", "the run's result",
	// ...
	What string `json:"what"`
	// Size is the payload's size in bytes of JSON; Limit the limit's.
	Size  int `json:"size"`
	Limit int `json:"limit"`
}

func (e *PayloadTooLargeError) Error() string {
	return fmt.Sprintf("temporal: payload_too_large: %s is %d bytes of JSON, over the limit of %d", e.What, e.Size, e.Limit)
}

// Is reports whether target is ErrPayloadTooLarge.
func (e *PayloadTooLargeError) Is(target error) bool { return target == ErrPayloadTooLarge }

// ErrorCode is the turn's code in turn_settled (rpc.ErrorCode).
func (e *PayloadTooLargeError) ErrorCode() string { return "payload_too_large" }

// payloadLimit is the limit a MaxPayload setting stands for; 0 for none.
func payloadLimit(setting int) int {
	switch {
	case setting < 0:
		return 0
	case setting == 0:
		return DefaultMaxPayload
	}
	return setting
}

// jsonSize is the size of v in JSON, as the default data converter
// encodes it; -1 when v has no JSON form.
func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return -1
	}
	return len(b)
}

// versionPayloadLimit is the change ID of the payload limit's checks: a
// history recorded before them (on a server whose limit was raised) may
// hold a payload above the limit, scheduled as it was.
const versionPayloadLimit = "payload-limit"

// limited reports whether the payload limit applies in this workflow: it
// is asked only when a payload is over the limit, so a history with none
// records no marker.
func limited(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionPayloadLimit, workflow.DefaultVersion, 1) >= 1
}

// fitsPrompt refuses, with a *PayloadTooLargeError, a prompt whose run's
// input (the context and the prompt) would be over Workflow.MaxPayload,
// before the engine takes it: the conversation is left as it was, and
// the prompt's update fails with code payload_too_large. A prompt that
// comes while a turn is in flight is left to the engine (busy).
func (d *driver) fitsPrompt(ctx workflow.Context, text string) error {
	limit := payloadLimit(d.w.MaxPayload)
	if limit <= 0 || d.turn != nil || !quiet(d.engine.Status()) {
		return nil
	}
	// The prompt's message around its text: ID, role, timestamp.
	const envelope = 512
	n := jsonSize(d.engine.Messages()) + jsonSize(text) + envelope
	if n <= limit || !limited(ctx) {
		return nil
	}
	return &PayloadTooLargeError{What: "the prompt's run input", Size: n, Limit: limit}
}

// tooLarge reports, with a *PayloadTooLargeError naming what, whether v is
// over Workflow.MaxPayload in this workflow; nil when it is not.
func (d *driver) tooLarge(ctx workflow.Context, what string, v any) *PayloadTooLargeError {
	limit := payloadLimit(d.w.MaxPayload)
	if limit <= 0 {
		return nil
	}
	if n := jsonSize(v); (n > limit || n < 0) && limited(ctx) {
		return &PayloadTooLargeError{What: what, Size: n, Limit: limit}
	}
	return nil
}
