package temporal

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	sdktemporal "go.temporal.io/sdk/temporal"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/transcript"
)

// StepAgent is an agent the workflow runs one step at a time: each model
// call is activity agentfsm.Model, each tool call activity agentfsm.Tool,
// and the workflow loops model → tools → model until the model stops
// calling tools. A worker lost mid-run then costs only the step in
// flight, which Temporal retries (Workflow.StepAttempts): the model calls
// and tool calls that had returned are in the workflow's history and are
// not made again. Sessions started with Start.Steps run this way; the
// others run the whole session.Agent run as one activity.
//
// A step retried after its worker was lost runs again from its start:
// a tool call can run twice (once on the lost worker), so a tool with a
// side effect should be idempotent on its call's ID.
type StepAgent interface {
	// Model makes one model call on step.Context and returns the
	// assistant's message; the tools it asks for are the message's
	// toolCall blocks (StopReason "toolUse"). A failed call is reported,
	// as by a session.Agent, as an assistant message with StopReason
	// "error" (the classifier reads it); a returned error is a run that
	// could not go on, which ends the run with that error. When ctx is
	// cancelled (the session aborted) the call stops and returns its
	// message with StopReason "aborted". Each fragment streamed goes to
	// step.Stream as it arrives.
	Model(ctx context.Context, step ModelStep) (ModelResult, error)
	// Tool runs one tool call. Its error becomes the tool result's
	// content, marked as an error, for the model to read.
	Tool(ctx context.Context, call ToolCall) (ToolResult, error)
}

// ModelStep is one model call of a step-wise run.
type ModelStep struct {
	SessionID string
	// Context is the messages to send: the runtime context (with the
	// user's prompt last, on a prompted run) and the messages this run
	// made so far.
	Context []transcript.Message
	// Model is the model to call, as session.RunRequest's.
	Model policy.Model
	// Credential is the credential to call the provider with, when the
	// worker's credential store knows one.
	Credential *policy.Credential
	// Stream receives the message_update fragments as they arrive; it
	// is never nil.
	Stream func(events.MessageUpdate)
}

// ModelResult is a model call's answer.
type ModelResult struct {
	// Message is the assistant's message. Its Provider and Model, when
	// empty, are the step's model's, its Timestamp, when 0, the time the
	// call returned.
	Message transcript.Message
}

// ToolCall is one tool call of a step-wise run: a toolCall block of the
// assistant's message.
type ToolCall struct {
	SessionID string          `json:"sessionId"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ToolResult is a tool call's answer.
type ToolResult struct {
	Content []transcript.Block `json:"content"`
	IsError bool               `json:"isError,omitempty"`
}

// FragmentSink is a Sink that also receives the message_update fragments,
// each as its wire line, from the activity that streams them, as they
// arrive. Fragments are best-effort and outside the workflow's history:
// they are not numbered with the durable events, they usually arrive
// before the durable message_end of their message (which Deliver hands
// over when the workflow has it), a step retried after its worker was
// lost streams its fragments again, and a failed (or panicking) Fragment
// is logged and not retried. Fragment is called on the activity's
// goroutine: it should return promptly.
type FragmentSink interface {
	Sink
	Fragment(ctx context.Context, sessionID string, line json.RawMessage) error
}

// ModelInput is what the workflow hands the model activity.
type ModelInput struct {
	SessionID string               `json:"sessionId"`
	Context   []transcript.Message `json:"context"`
	Model     policy.Model         `json:"model"`
	// First is set on a run's first model call: the one the worker's
	// Limiter may hold.
	First bool `json:"first,omitempty"`
}

// ModelOutput is how a model call went.
type ModelOutput struct {
	// Message is the assistant's message; nil when the call returned an
	// error, panicked or was held.
	Message *transcript.Message `json:"message,omitempty"`
	// Err, Panic, Credential and Held are RunResult's, for this call.
	Err        string `json:"error,omitempty"`
	Panic      string `json:"panic,omitempty"`
	Credential string `json:"credential,omitempty"`
	Held       *Held  `json:"held,omitempty"`
	// TooLarge is set, and Message left out, when the output was over
	// Activities.MaxPayload: the run ends with it.
	TooLarge *PayloadTooLargeError `json:"tooLarge,omitempty"`
}

// errNoSteps is the model and tool activities' error on a worker whose
// Activities have no StepAgent: a failure of the worker's setup, which no
// retry mends.
var errNoSteps = sdktemporal.NewNonRetryableApplicationError("temporal: Activities.Steps is nil (the session was started with Start.Steps)", "no_step_agent", nil)

// Model is the model activity: one model call of a step-wise run. It
// asks the worker's Limiter before calling (and tells it how the call
// ended), heartbeats while the model streams and hands each fragment to
// Stream and to a FragmentSink. The call's failure is the result's,
// never the activity's.
func (a *Activities) Model(ctx context.Context, in ModelInput) (ModelOutput, error) {
	if a.Steps == nil {
		return ModelOutput{}, errNoSteps
	}
	step := ModelStep{SessionID: in.SessionID, Context: in.Context, Model: in.Model}
	var out ModelOutput
	if a.Credentials != nil && in.Model.Provider != "" {
		if c, ok := a.Credentials.Current(in.Model.Provider, in.SessionID); ok {
			step.Credential = &c
			out.Credential = c.ID
		}
	}
	if a.Limiter != nil {
		if until, key, reason := a.Limiter.Admit(in.Model.Provider, out.Credential); !until.IsZero() {
			out.Held = &Held{Until: until, Key: key, Reason: reason}
			return out, nil
		}
	}
	stop := heartbeat(ctx)
	defer stop()
	step.Stream = a.streamer(ctx, in.SessionID)
	res, panicked, err := a.model(ctx, step)
	switch {
	case panicked != "":
		out.Panic = panicked
	case err != nil:
		out.Err = err.Error()
	default:
		m := res.Message
		if m.Role == "" {
			m.Role = transcript.RoleAssistant
		}
		if m.Provider == "" && m.Model == "" {
			m.Provider, m.Model = in.Model.Provider, in.Model.ID
		}
		if m.Timestamp == 0 {
			m.Timestamp = time.Now().UnixMilli()
		}
		if _, err := json.Marshal(m); err != nil {
			// A result that cannot be encoded would fail the activity,
			// and Temporal would make the call again: the run ends here.
			out.Err = fmt.Sprintf("temporal: the model's message cannot be written: %v", err)
		} else {
			out.Message = &m
		}
	}
	if a.Limiter != nil {
		a.Limiter.Done(in.Model.Provider, out.Credential, out.Message)
	}
	if limit := payloadLimit(a.MaxPayload); limit > 0 {
		if n := jsonSize(out); n > limit {
			// The server would refuse the result, and Temporal would make
			// the call again: the run ends here.
			return ModelOutput{Credential: out.Credential, TooLarge: &PayloadTooLargeError{What: "the model call's result", Size: n, Limit: limit}}, nil
		}
	}
	return out, nil
}

// model calls the step agent's Model, recovering a panic as its text.
func (a *Activities) model(ctx context.Context, step ModelStep) (res ModelResult, panicked string, err error) {
	defer func() {
		if r := recover(); r != nil {
			panicked = panicText(r)
		}
	}()
	res, err = a.Steps.Model(ctx, step)
	return res, "", err
}

// Tool is the tool activity: one tool call of a step-wise run. It
// returns the tool result's message; the tool's error (or panic) is the
// message's content, marked as an error, and so is, in place of the
// result, a *PayloadTooLargeError's text when the result is over
// Activities.MaxPayload.
func (a *Activities) Tool(ctx context.Context, call ToolCall) (transcript.Message, error) {
	if a.Steps == nil {
		return transcript.Message{}, errNoSteps
	}
	stop := heartbeat(ctx)
	defer stop()
	res, err := a.tool(ctx, call)
	m := transcript.Message{Role: transcript.RoleToolResult, ToolCallID: call.ID, ToolName: call.Name,
		Content: res.Content, ToolError: res.IsError, Timestamp: time.Now().UnixMilli()}
	if err != nil {
		m.Content, m.ToolError = transcript.TextContent(err.Error()), true
	}
	if _, err := json.Marshal(m); err != nil {
		// A result that cannot be encoded would fail the activity, and
		// Temporal would run the tool again: the model reads why instead.
		m.Content, m.ToolError = transcript.TextContent(fmt.Sprintf("temporal: the tool's result cannot be written: %v", err)), true
	}
	if limit := payloadLimit(a.MaxPayload); limit > 0 {
		if n := jsonSize(m); n > limit {
			// The server would refuse the result, and Temporal would run
			// the tool again: the model reads why instead.
			tooLarge := &PayloadTooLargeError{What: "the tool's result", Size: n, Limit: limit}
			m.Content, m.ToolError = transcript.TextContent(tooLarge.Error()), true
		}
	}
	return m, nil
}

// tool calls the step agent's Tool, recovering a panic as an error.
func (a *Activities) tool(ctx context.Context, call ToolCall) (res ToolResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("temporal: the tool %q panicked: %s", call.Name, panicText(r))
		}
	}()
	return a.Steps.Tool(ctx, call)
}

// streamer is what a run or model activity hands each fragment to: it
// records a heartbeat, then gives the fragment to Stream and, as its wire
// line, to a FragmentSink.
func (a *Activities) streamer(ctx context.Context, sessionID string) func(events.MessageUpdate) {
	fs, _ := a.Sink.(FragmentSink)
	return func(u events.MessageUpdate) {
		activity.RecordHeartbeat(ctx) // the SDK sends at most one per interval
		if a.Stream != nil {
			a.Stream(sessionID, u)
		}
		if fs == nil {
			return
		}
		if err := fragment(ctx, fs, sessionID, u); err != nil {
			activity.GetLogger(ctx).Warn("temporal: a fragment was not delivered", "error", err)
		}
	}
}

// fragment hands u to fs as its wire line. A panic of the sink is its
// error: a fragment is best-effort, and a broken sink fails no run.
func fragment(ctx context.Context, fs FragmentSink, sessionID string, u events.MessageUpdate) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("temporal: the sink's Fragment panicked: %s", panicText(r))
		}
	}()
	line, err := rpc.MarshalEvent(u)
	if err != nil {
		return err
	}
	return fs.Fragment(ctx, sessionID, line)
}

// panicText is a recovered panic value as text, never empty.
func panicText(r any) string {
	if s := fmt.Sprint(r); s != "" {
		return s
	}
	return "(empty panic value)"
}
