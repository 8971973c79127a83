package temporal

import (
	"errors"
	"fmt"
	"time"

	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// runSteps runs run id step by step (Start.Steps): activity agentfsm.Model
// for each model call, agentfsm.Tool for each tool call the model asks
// for, until the model stops calling tools. It feeds the engine the
// events a session.Agent reports for the same run, as each step returns:
// agent_start, then per model call turn_start, the assistant's
// message_start and message_end, the tool results' message_start and
// message_end, turn_end, and agent_end with every message last; then the
// run's return. ctx is the run's (cancelled by CancelRun: the step in
// flight is cancelled and waited for), gctx the coroutine's.
//
// A step's activity is retried by Temporal when it fails (its worker
// lost), up to Workflow.StepAttempts, without the steps before it; a step
// that still times out makes the run a lost one, as a whole run's
// activity timing out does (see interrupted).
func (d *driver) runSteps(ctx, gctx workflow.Context, id policy.RunID, in RunInput) {
	attempts := d.w.StepAttempts
	if attempts <= 0 {
		attempts = 3
	}
	maxSteps := d.w.MaxSteps
	if maxSteps <= 0 {
		maxSteps = 100
	}
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: orDefault(d.w.RunTimeout, 10*time.Minute),
		HeartbeatTimeout:    orDefault(d.w.HeartbeatTimeout, 30*time.Second),
		RetryPolicy:         &sdktemporal.RetryPolicy{MaximumAttempts: int32(min(attempts, 1<<30))},
		WaitForCancellation: true,
	}
	actx := workflow.WithActivityOptions(ctx, opts)
	// get waits for a step's future f in history order (see await) and
	// holds listen until the next get or the run's end, so that what the
	// step brought is fed before any signal that came after it.
	release := func() {}
	defer func() { release() }()
	get := func(f workflow.Future, out any) error {
		release()
		release = d.await(gctx, f)
		return f.Get(gctx, out)
	}
	feed := func(ev events.Event) {
		d.feed(gctx, func(at time.Time) []policy.Effect { return d.engine.RunEvent(at, id, ev) })
	}
	// The runtime context with the prompt last: the run's input carries
	// the prompt apart from it (PromptOmitted).
	base := in.request().Context
	var made []transcript.Message
	var ret policy.RunReturn
	started := false
	// end ends the run: agent_end when it started and did not fail,
	// then its return. A started run that fails returns without
	// agent_end, so that the engine ends it in an error message made of
	// its error, as for a session.Agent's.
	end := func() {
		if d.runID == id {
			d.runCancel = nil
		}
		if started && ret.Err == nil && ret.Panic == nil {
			feed(events.AgentEnd{Messages: made})
		}
		ret.Draw = d.draw(gctx)
		d.feed(gctx, func(at time.Time) []policy.Effect { return d.engine.RunReturned(at, id, ret) })
	}
	// lost reports whether err is a step's activity lost with its
	// worker after its attempts: the run then goes on as a lost run.
	lost := func(err error) bool {
		var timeout *sdktemporal.TimeoutError
		if errors.As(err, &timeout) && d.cancelled != id && d.engine.Snapshot().InFlight != "" {
			if d.runID == id {
				d.runCancel = nil
			}
			d.interrupted(gctx)
			return true
		}
		return false
	}
	for step := 0; ; step++ {
		if ctx.Err() != nil {
			end()
			return
		}
		if step == maxSteps {
			ret.Err = fmt.Errorf("temporal: the run made %d model calls and still calls tools (Workflow.MaxSteps)", maxSteps)
			end()
			return
		}
		input := ModelInput{SessionID: in.SessionID, Context: append(base[:len(base):len(base)], made...), Model: in.Model, First: step == 0}
		if tooLarge := d.tooLarge(gctx, "the model call's input", input); tooLarge != nil {
			// The context grew past the limit within the run (a tool's
			// result): scheduled, the call would fail every workflow
			// task.
			ret.Err = tooLarge
			end()
			return
		}
		var out ModelOutput
		err := get(workflow.ExecuteActivity(actx, ActivityModel, input), &out)
		if err != nil {
			if lost(err) {
				return
			}
			// Cancelled before it started, or a worker without a step
			// agent: the call reported nothing.
			ret.Err = err
			end()
			return
		}
		ret.Credential = out.Credential
		if out.TooLarge != nil {
			ret.Err = out.TooLarge
			end()
			return
		}
		if h := out.Held; h != nil {
			if step == 0 {
				// The run made no call: the engine waits it out.
				ret.HeldUntil, ret.HeldKey, ret.HeldReason = h.Until, h.Key, h.Reason
				end()
				return
			}
			// A later call held: the run waits in place, then asks again.
			if err := get(workflow.NewTimer(ctx, max(h.Until.Sub(workflow.Now(gctx)), 0)), nil); err != nil {
				end() // aborted during the wait
				return
			}
			step--
			continue
		}
		if out.Panic != "" || out.Err != "" || out.Message == nil {
			if out.Panic != "" {
				ret.Panic = out.Panic
			}
			if out.Err != "" {
				ret.Err = errors.New(out.Err)
			} else if out.Panic == "" {
				ret.Err = errors.New("temporal: the model call returned no message")
			}
			end()
			return
		}
		m := *out.Message
		if !started {
			started = true
			feed(events.AgentStart{})
		}
		feed(events.CallStart{})
		// The message's start, as an agent streaming it reports it.
		feed(events.MessageStart{Message: transcript.Message{ID: m.ID, Role: m.Role, Provider: m.Provider, Model: m.Model, Timestamp: m.Timestamp}})
		feed(events.MessageEnd{Message: m})
		made = append(made, m)
		if m.StopReason != transcript.StopReasonToolUse || ctx.Err() != nil {
			feed(events.CallEnd{})
			end()
			return
		}
		for _, call := range m.ToolCalls() {
			if ctx.Err() != nil {
				break
			}
			var r transcript.Message
			err := get(workflow.ExecuteActivity(actx, ActivityTool, ToolCall{SessionID: in.SessionID, ID: call.ID, Name: call.Name, Arguments: call.Arguments}), &r)
			if err != nil {
				if lost(err) {
					return
				}
				if ctx.Err() == nil {
					ret.Err = err
				}
				break
			}
			feed(events.MessageStart{Message: r})
			feed(events.MessageEnd{Message: r})
			made = append(made, r)
		}
		feed(events.CallEnd{})
		if ret.Err != nil {
			end()
			return
		}
	}
}
