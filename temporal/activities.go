package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// Sink receives a session's events, in order, each as its wire line
// (docs/rpc.md): the recovery events and the agent's, all but the
// message_update fragments (see Activities.Stream).
type Sink interface {
	// Deliver receives the events numbered first, first+1, ... of session
	// sessionID. A delivery that failed is made again with the same
	// numbers, and so is one in flight when the workflow continued as new
	// (Start.Pending), so a sink that saw some of them skips those. A
	// batch that still failed after its attempts is dropped (and logged
	// by the workflow): the next batch's numbers then skip it. A line has
	// crossed the SDK's JSON converter: the same JSON as the wire line,
	// with <, > and & written \u003c, \u003e and \u0026.
	Deliver(ctx context.Context, sessionID string, first int64, lines []json.RawMessage) error
}

// Activities are the session's activities: what a worker reaches outside
// the workflow. Register them with Register on every worker of the task
// queue. Their fields are the embedder's, as for a session.Session.
type Activities struct {
	// Agent runs the model, a whole run per activity; it is required
	// unless every session is started with Start.Steps.
	Agent session.Agent
	// Steps runs the model one step at a time (StepAgent): the sessions
	// started with Start.Steps call it, a model call or a tool call per
	// activity, instead of Agent.
	Steps StepAgent
	// Summarizer writes compaction summaries; nil is
	// policy.DigestSummarizer{}.
	Summarizer session.Summarizer
	// Credentials is the credential store of the sessions started with
	// Start.Credentials; the credential of each run is read here, in the
	// activity, and never enters the workflow.
	Credentials credentials.CredentialStore
	// Sink receives the sessions' events; nil drops them. A FragmentSink
	// also receives the message_update fragments, from the activity
	// streaming them, as they arrive.
	Sink Sink
	// Stream, when set, receives each message_update fragment as the
	// agent streams it, on the run's (or model call's) activity:
	// fragments decide nothing and are not kept in the workflow.
	Stream func(sessionID string, ev events.MessageUpdate)
	// Limiter, when set, is a limit the sessions whose runs this worker
	// executes share (session.WithLimiter; a *limiter.Limiter): the run
	// activity asks it before calling the agent, and a run it holds makes
	// no call and returns Held, which the workflow waits out on a durable
	// timer. It is the worker's: sessions whose runs go to another worker
	// share another's, and a restarted worker starts with a new one
	// (docs/temporal.md).
	Limiter session.Limiter
	// MaxPayload is the largest result, in bytes of JSON, the run, model,
	// tool and summary activities return: a larger one (a reply the
	// server would refuse) comes back as RunResult.TooLarge (its events
	// left out), ModelOutput.TooLarge (its message left out) or
	// SummaryResult.TooLarge, and the turn or the compaction fails with a
	// *PayloadTooLargeError; a tool's result is replaced by a
	// tool error that says so, for the model to read. 0 means
	// DefaultMaxPayload; a negative value checks nothing (for a
	// claim-check codec).
	MaxPayload int
}

// ActivityRegistry is where activities are registered: a worker.Worker or
// a testsuite environment.
type ActivityRegistry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers the activities under their names (ActivityRun and the
// others).
func (a *Activities) Register(r ActivityRegistry) {
	r.RegisterActivityWithOptions(a.Run, activity.RegisterOptions{Name: ActivityRun})
	r.RegisterActivityWithOptions(a.Summarize, activity.RegisterOptions{Name: ActivitySummarize})
	r.RegisterActivityWithOptions(a.MarkUsageLimit, activity.RegisterOptions{Name: ActivityMarkUsageLimit})
	r.RegisterActivityWithOptions(a.Deliver, activity.RegisterOptions{Name: ActivityDeliver})
	r.RegisterActivityWithOptions(a.Model, activity.RegisterOptions{Name: ActivityModel})
	r.RegisterActivityWithOptions(a.Tool, activity.RegisterOptions{Name: ActivityTool})
}

// RunInput is what the workflow hands the run activity.
type RunInput struct {
	SessionID string              `json:"sessionId"`
	Prompt    *transcript.Message `json:"prompt,omitempty"`
	// Context is the runtime context; without its last message, Prompt,
	// when PromptOmitted is set, so that the prompt is not in the
	// history twice: the activity appends it again.
	Context       []transcript.Message `json:"context"`
	PromptOmitted bool                 `json:"promptOmitted,omitempty"`
	Model         policy.Model         `json:"model"`
}

// request is the agent's RunRequest for in.
func (in RunInput) request() session.RunRequest {
	req := session.RunRequest{SessionID: in.SessionID, Prompt: in.Prompt, Context: in.Context, Model: in.Model}
	if in.PromptOmitted && in.Prompt != nil {
		ctx := append(in.Context[:len(in.Context):len(in.Context)], *in.Prompt)
		req.Context, req.Prompt = ctx, &ctx[len(ctx)-1]
	}
	return req
}

// RunResult is how a run went: the agent's events but the fragments, in
// order, and how its Run returned.
type RunResult struct {
	Events []AgentEvent `json:"events"`
	// Err is the error Run returned; empty when none.
	Err string `json:"error,omitempty"`
	// Panic is what the agent panicked with; empty when it did not.
	Panic string `json:"panic,omitempty"`
	// Credential is the ID of the credential the run called its provider
	// with (never its secret); empty when the store offered none.
	Credential string `json:"credential,omitempty"`
	// Held is set when the worker's Limiter held the run: it made no
	// call, and the session waits until Held.Until.
	Held *Held `json:"held,omitempty"`
	// TooLarge is set when the result was larger than
	// Activities.MaxPayload: Events and Err are left out, and the turn
	// fails with it.
	TooLarge *PayloadTooLargeError `json:"tooLarge,omitempty"`
}

// Held is a run the worker's Limiter held (see events.SharedLimitWait):
// until when, the key (provider and credential) and why.
type Held struct {
	Until  time.Time `json:"until"`
	Key    string    `json:"key"`
	Reason string    `json:"reason"`
}

// AgentEvent is one of the agent's events in a RunResult.
type AgentEvent struct {
	// Type is the event's wire type: agent_start, turn_start,
	// message_start, message_end, turn_end or agent_end.
	Type     string               `json:"type"`
	Message  *transcript.Message  `json:"message,omitempty"`
	Messages []transcript.Message `json:"messages"`
}

// agentEvent returns ev as an AgentEvent; false for an event that is not
// one of the agent's.
func agentEvent(ev events.Event) (AgentEvent, bool) {
	switch ev := ev.(type) {
	case events.AgentStart:
		return AgentEvent{Type: "agent_start"}, true
	case events.CallStart:
		return AgentEvent{Type: "turn_start"}, true
	case events.MessageStart:
		return AgentEvent{Type: "message_start", Message: &ev.Message}, true
	case events.MessageEnd:
		return AgentEvent{Type: "message_end", Message: &ev.Message}, true
	case events.CallEnd:
		return AgentEvent{Type: "turn_end"}, true
	case events.AgentEnd:
		return AgentEvent{Type: "agent_end", Messages: ev.Messages}, true
	}
	return AgentEvent{}, false
}

// event returns the session event e stands for.
func (e AgentEvent) event() (events.Event, error) {
	switch {
	case e.Type == "agent_start":
		return events.AgentStart{}, nil
	case e.Type == "turn_start":
		return events.CallStart{}, nil
	case e.Type == "turn_end":
		return events.CallEnd{}, nil
	case e.Type == "agent_end":
		return events.AgentEnd{Messages: e.Messages}, nil
	case e.Message == nil:
		return nil, fmt.Errorf("temporal: agent event %q without a message", e.Type)
	case e.Type == "message_start":
		return events.MessageStart{Message: *e.Message}, nil
	case e.Type == "message_end":
		return events.MessageEnd{Message: *e.Message}, nil
	}
	return nil, fmt.Errorf("temporal: unknown agent event %q", e.Type)
}

// Run is the run activity: it calls the agent, heartbeating while the agent
// streams, and returns its events. Cancelling the activity cancels the
// run; the events the agent reports on its way out are returned all the
// same. The agent's failure is the result's, never the activity's: the
// engine decides what comes of it.
func (a *Activities) Run(ctx context.Context, in RunInput) (RunResult, error) {
	if a.Agent == nil {
		return RunResult{}, errors.New("temporal: Activities.Agent is nil")
	}
	req := in.request()
	if a.Credentials != nil && in.Model.Provider != "" {
		if c, ok := a.Credentials.Current(in.Model.Provider, in.SessionID); ok {
			req.Credential = &c
		}
	}
	var res RunResult
	if req.Credential != nil {
		res.Credential = req.Credential.ID
	}
	if a.Limiter != nil {
		if until, key, reason := a.Limiter.Admit(in.Model.Provider, res.Credential); !until.IsZero() {
			res.Held = &Held{Until: until, Key: key, Reason: reason}
			return res, nil
		}
	}
	stop := heartbeat(ctx)
	defer stop()
	var mu sync.Mutex
	stream := a.streamer(ctx, in.SessionID)
	emit := func(ev events.Event) {
		if u, ok := ev.(events.MessageUpdate); ok {
			stream(u)
			return
		}
		activity.RecordHeartbeat(ctx) // the SDK sends at most one per interval
		if e, ok := agentEvent(ev); ok {
			mu.Lock()
			res.Events = append(res.Events, e)
			mu.Unlock()
		}
	}
	panicked, err := a.call(ctx, req, emit)
	mu.Lock()
	defer mu.Unlock()
	if a.Limiter != nil {
		a.Limiter.Done(in.Model.Provider, res.Credential, lastAssistant(res.Events))
	}
	if err != nil {
		res.Err = err.Error()
	}
	res.Panic = panicked
	if limit := payloadLimit(a.MaxPayload); limit > 0 {
		if n := jsonSize(res); n > limit {
			return RunResult{Credential: res.Credential, TooLarge: &PayloadTooLargeError{What: "the run's result", Size: n, Limit: limit}}, nil
		}
	}
	return res, nil
}

// lastAssistant returns the last assistant message of a run's events, nil
// when it made none.
func lastAssistant(evs []AgentEvent) *transcript.Message {
	for i := len(evs) - 1; i >= 0; i-- {
		if e := evs[i]; e.Type == "message_end" && e.Message != nil && e.Message.Role == transcript.RoleAssistant {
			return e.Message
		}
	}
	return nil
}

// call runs the agent, recovering a panic as its text.
func (a *Activities) call(ctx context.Context, req session.RunRequest, emit func(events.Event)) (panicked string, err error) {
	defer func() {
		if r := recover(); r != nil {
			panicked = panicText(r)
		}
	}()
	return "", a.Agent.Run(ctx, req, emit)
}

// heartbeat records a heartbeat now and then until stop is called, so that
// a run that streams nothing for a while is not taken for a lost one, and
// so that the activity learns of its cancellation.
func heartbeat(ctx context.Context) (stop func()) {
	every := time.Second
	if t := activity.GetInfo(ctx).HeartbeatTimeout; t > 0 {
		every = t / 3
	}
	activity.RecordHeartbeat(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				activity.RecordHeartbeat(ctx)
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// SummaryResult is a compaction's answer: the summary, or why there is
// none.
type SummaryResult struct {
	Summary policy.Summary `json:"summary"`
	Err     string         `json:"error,omitempty"`
	// TooLarge is set, and Summary left out, when the result was over
	// Activities.MaxPayload: the compaction fails with it.
	TooLarge *PayloadTooLargeError `json:"tooLarge,omitempty"`
}

// Summarize is the compaction activity: it asks the summarizer. Cancelling
// the activity cancels the summarizer. Its failure is the result's.
func (a *Activities) Summarize(ctx context.Context, req policy.SummaryRequest) (res SummaryResult, _ error) {
	var sum session.Summarizer = policy.DigestSummarizer{}
	if a.Summarizer != nil {
		sum = a.Summarizer
	}
	stop := heartbeat(ctx)
	defer stop()
	defer func() {
		if r := recover(); r != nil {
			res = SummaryResult{Err: fmt.Sprintf("the summarizer panicked: %v", r)}
		}
	}()
	s, err := sum.Summarize(ctx, req)
	if err != nil {
		return SummaryResult{Err: err.Error()}, nil
	}
	res = SummaryResult{Summary: s}
	if limit := payloadLimit(a.MaxPayload); limit > 0 {
		if n := jsonSize(res); n > limit {
			// The server would refuse the result, and Temporal would ask
			// the summarizer again, for as large a summary.
			return SummaryResult{TooLarge: &PayloadTooLargeError{What: "the summary", Size: n, Limit: limit}}, nil
		}
	}
	return res, nil
}

// UsageLimit is a usage limit the workflow reports to the credential store.
type UsageLimit struct {
	SessionID string       `json:"sessionId"`
	Model     policy.Model `json:"model"`
	// Hint is how long the server asked to wait; 0 for the store's
	// default.
	Hint time.Duration `json:"hint"`
}

// MarkUsageLimit is the credential store's activity: it reports the usage
// limit and answers whether the session now has another free credential.
func (a *Activities) MarkUsageLimit(_ context.Context, u UsageLimit) (bool, error) {
	if a.Credentials == nil {
		return false, nil
	}
	return a.Credentials.MarkUsageLimitReached(u.Model.Provider, u.SessionID, u.Hint, u.Model.BaseURL), nil
}

// Delivery is a batch of events for the sink.
type Delivery struct {
	SessionID string            `json:"sessionId"`
	First     int64             `json:"first"`
	Lines     []json.RawMessage `json:"lines"`
}

// Deliver is the sink's activity.
func (a *Activities) Deliver(ctx context.Context, d Delivery) error {
	if a.Sink == nil {
		return nil
	}
	return a.Sink.Deliver(ctx, d.SessionID, d.First, d.Lines)
}
