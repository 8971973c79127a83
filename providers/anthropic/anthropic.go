// Package anthropic is a session.Agent over Anthropic's Messages API,
// spoken over net/http (POST /v1/messages, streamed as server-sent
// events): no SDK is linked, so a program that imports the package builds
// in seconds.
//
// An Agent streams each model call, reports text, thinking and tool-call
// fragments as MessageUpdate events, runs the tools the embedder registered
// and loops model call → tool calls → tool results → model call until the
// model stops. It never retries a call: the session owns retrying. A
// failed call is an assistant message with the typed facts the classifier
// reads (docs/providers.md, "The Anthropic adapter").
//
// The API key is resolved at call time from the credential the session
// hands the run, through Options.Secrets; the key is never put in a
// message, an event or an error.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/apicall"
	"github.com/agentfsm/agentfsm/internal/httpsafe"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// Provider is the provider name the agent reports and resolves credentials
// for.
const Provider = "anthropic"

// DefaultModel is the model of an agent whose Options name none.
const DefaultModel = "claude-sonnet-4-5"

// DefaultMaxTokens is the output limit of a call when Options.MaxTokens is
// 0.
const DefaultMaxTokens = 8192

// knownWindows are the context windows, in tokens, of the models the
// package knows. A model ID with a date suffix (claude-sonnet-4-5-20250929)
// takes its family's window.
var knownWindows = map[string]int{
	"claude-opus-4-5":   200000,
	"claude-opus-4-1":   200000,
	"claude-opus-4-0":   200000,
	"claude-opus-4":     200000,
	"claude-sonnet-4-5": 200000,
	"claude-sonnet-4-0": 200000,
	"claude-sonnet-4":   200000,
	"claude-haiku-4-5":  200000,
	"claude-3-7-sonnet": 200000,
	"claude-3-5-sonnet": 200000,
	"claude-3-5-haiku":  200000,
	"claude-3-haiku":    200000,
}

// ContextWindows returns a copy of the table of known models' context
// windows, in tokens.
func ContextWindows() map[string]int {
	out := make(map[string]int, len(knownWindows))
	for k, v := range knownWindows {
		out[k] = v
	}
	return out
}

// Tool is a tool the model may call.
type Tool struct {
	// Name and Description are what the model sees.
	Name        string
	Description string
	// Schema is the JSON schema of the tool's arguments, an object schema;
	// nil means an object with any properties.
	Schema json.RawMessage
	// Run runs the tool with the arguments the model wrote (a JSON
	// object). Its result is sent back to the model; an error (or a panic)
	// is sent back as a tool result with isError, holding the error's
	// text.
	Run func(ctx context.Context, args json.RawMessage) (string, error)
}

// Options configure an Agent.
type Options struct {
	// Model is the model ID; DefaultModel when empty. A run whose
	// RunRequest.Model is Anthropic's and names a model calls that one
	// instead: the session's fallback model (docs/policy.md §3.9).
	Model string
	// MaxTokens is the output limit of one call; DefaultMaxTokens when 0.
	MaxTokens int64
	// System is the system prompt, when not empty.
	System string
	// BaseURL is the API's base URL, the requests going to its
	// v1/messages; DefaultBaseURL when empty.
	BaseURL string
	// HTTPClient makes the requests; http.DefaultClient when nil.
	HTTPClient *http.Client
	// Secrets turns a credential into its API key at call time;
	// credentials.EnvSecrets{} (ANTHROPIC_API_KEY, or the credential's
	// "env:NAME") when nil.
	Secrets credentials.SecretResolver
	// Tools are the tools the model may call.
	Tools []Tool
	// ContextWindows overrides or adds entries of the known models'
	// windows (see ContextWindows).
	ContextWindows map[string]int
	// IdleTimeout ends a model call that receives nothing (no headers, no
	// event of the answer: a ping or a trickle of bytes inside one event
	// does not count) for that long, as a transient failure the session
	// may retry. 0 means DefaultIdleTimeout, a negative value no limit. A
	// stream that keeps sending events is bounded by the caller's context.
	IdleTimeout time.Duration
	// MaxToolRounds caps the rounds of tool calls in one run (a model call
	// answered with tool calls, whose results go back to the model): when
	// the model still calls tools after that many, the run ends with a
	// failed assistant message of error type ErrorTypeToolRounds, which the
	// session does not retry. 0 means DefaultMaxToolRounds, a negative
	// value no cap.
	MaxToolRounds int
}

// DefaultMaxToolRounds is the MaxToolRounds of Options that set none:
// room for a long task, a stop for a model that loops on its tools.
const DefaultMaxToolRounds = 100

// ErrorTypeToolRounds is the error type of the message that ends a run at
// its MaxToolRounds; the classifier takes it as fatal.
const ErrorTypeToolRounds = "tool_rounds_exceeded"

// DefaultIdleTimeout is the IdleTimeout of Options that set none: long
// enough for a model that thinks a while before its first token.
const DefaultIdleTimeout = 5 * time.Minute

// idleError is the failure of a call that received nothing for too long:
// it reads as a timeout, which the classifier takes as transient, by its
// Go error (context.DeadlineExceeded) and, where the error is lost (a
// message that crossed a Temporal activity's boundary, a history), by its
// text ("timed out", of the extended rules).
type idleError struct{ d time.Duration }

func (e *idleError) Error() string {
	return fmt.Sprintf("anthropic: timed out: no data from the server for %s (Options.IdleTimeout)", e.d)
}

func (e *idleError) Unwrap() error { return context.DeadlineExceeded }

// Agent is a session.Agent over the Messages API. It is safe for
// concurrent use by several sessions.
type Agent struct {
	opts Options
}

var _ session.Agent = (*Agent)(nil)

// New returns an agent with opts, its defaults filled.
func New(opts Options) *Agent {
	if opts.Model == "" {
		opts.Model = DefaultModel
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	if opts.Secrets == nil {
		opts.Secrets = credentials.EnvSecrets{}
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxToolRounds == 0 {
		opts.MaxToolRounds = DefaultMaxToolRounds
	}
	opts.Tools = append([]Tool(nil), opts.Tools...)
	windows := ContextWindows()
	for k, v := range opts.ContextWindows {
		windows[k] = v
	}
	opts.ContextWindows = windows
	return &Agent{opts: opts}
}

// Model returns the agent's model, with its context window when the table
// knows it (0 otherwise: then the session's threshold compaction is off)
// and its base URL, any password in it masked: the model goes into the
// session's state, its snapshots and the RPC server's answers.
func (a *Agent) Model() policy.Model {
	return policy.Model{Provider: Provider, ID: a.opts.Model, ContextWindow: a.window(a.opts.Model), BaseURL: httpsafe.RedactURL(a.opts.BaseURL)}
}

// window returns the context window of model id: its entry, or the entry
// of the longest name that prefixes it followed by "-".
func (a *Agent) window(id string) int {
	if w, ok := a.opts.ContextWindows[id]; ok {
		return w
	}
	best, w := 0, 0
	for name, v := range a.opts.ContextWindows {
		if strings.HasPrefix(id, name+"-") && len(name) > best {
			best, w = len(name), v
		}
	}
	return w
}

// Run implements session.Agent. It returns an error without emitting
// anything when the run cannot start: the credential's secret cannot be
// resolved, or the context or a tool's schema cannot be sent.
func (a *Agent) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	cred := policy.Credential{Provider: Provider}
	if req.Credential != nil {
		cred = *req.Credential
	}
	key, err := a.opts.Secrets.Resolve(ctx, cred)
	if err != nil {
		return fmt.Errorf("anthropic: %w", err)
	}
	// A server that echoes the key back gets it redacted by the session.
	session.NoteSecret(ctx, key)
	tools, err := a.toolParams()
	if err != nil {
		return err
	}
	conversation := append([]transcript.Message(nil), req.Context...)
	if _, err := messageParams(conversation); err != nil {
		return err
	}
	model := a.opts.Model
	if req.Model.Provider == Provider && req.Model.ID != "" {
		model = req.Model.ID
	}
	emit(events.AgentStart{})
	var made []transcript.Message
	for rounds := 0; ; rounds++ {
		emit(events.CallStart{})
		msgs, err := messageParams(conversation)
		var msg transcript.Message
		if capped := a.opts.MaxToolRounds; capped > 0 && rounds >= capped {
			msg = toolRoundsExceeded(capped)
			msg.Provider, msg.Model, msg.Timestamp = Provider, model, time.Now().UnixMilli()
			emit(events.MessageStart{Message: msg})
		} else if err != nil {
			// Only a tool result can make it so: report, do not panic.
			msg = session.FailedMessage(0, nil, nil, err)
			msg.Provider, msg.Model, msg.Timestamp = Provider, model, time.Now().UnixMilli()
			emit(events.MessageStart{Message: msg})
		} else {
			params := request{Model: model, MaxTokens: a.opts.MaxTokens, Messages: msgs, Tools: tools, Stream: true}
			if a.opts.System != "" {
				params.System = []textParam{newText(a.opts.System)}
			}
			msg = a.call(ctx, key, params, model, emit)
		}
		emit(events.MessageEnd{Message: msg})
		made = append(made, msg)
		conversation = append(conversation, msg)
		if msg.StopReason != transcript.StopReasonToolUse {
			emit(events.CallEnd{})
			break
		}
		for _, b := range msg.Content {
			if b.Type != transcript.BlockToolCall {
				continue
			}
			result := a.runTool(ctx, b)
			emit(events.MessageStart{Message: result})
			emit(events.MessageEnd{Message: result})
			made = append(made, result)
			conversation = append(conversation, result)
		}
		emit(events.CallEnd{})
	}
	emit(events.AgentEnd{Messages: made})
	return nil
}

// toolRoundsExceeded is the message that ends a run at its cap of
// capped tool rounds.
func toolRoundsExceeded(capped int) transcript.Message {
	err := fmt.Errorf("anthropic: the run reached its cap of %d tool rounds (Options.MaxToolRounds) and the model still calls tools", capped)
	m := session.FailedMessage(0, nil, nil, err)
	m.ErrorType = ErrorTypeToolRounds
	m.ErrorMessage = err.Error()
	return m
}

// runTool runs the tool call b and returns its result message.
func (a *Agent) runTool(ctx context.Context, b transcript.Block) transcript.Message {
	m := transcript.Message{Role: transcript.RoleToolResult, ToolCallID: b.ID, ToolName: b.Name}
	var tool *Tool
	for i := range a.opts.Tools {
		if a.opts.Tools[i].Name == b.Name {
			tool = &a.opts.Tools[i]
		}
	}
	args := b.Arguments
	if args == nil {
		args = json.RawMessage("{}")
	}
	var out string
	var err error
	switch {
	case tool == nil:
		err = fmt.Errorf("anthropic: no tool named %q", b.Name)
	case tool.Run == nil:
		err = fmt.Errorf("anthropic: tool %q has no Run function", b.Name)
	default:
		out, err = runGuarded(ctx, tool, args)
	}
	if err != nil {
		out, m.ToolError = err.Error(), true
	}
	m.Content = transcript.TextContent(out)
	m.Timestamp = time.Now().UnixMilli()
	return m
}

// runGuarded runs tool with args; a panic of the tool is its error, as
// an error is: the model gets it as a result, and the run goes on.
func runGuarded(ctx context.Context, tool *Tool, args json.RawMessage) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("anthropic: tool %q panicked: %v", tool.Name, r)
		}
	}()
	return tool.Run(ctx, args)
}

// call makes one streaming model call and returns its assistant message,
// emitting MessageStart and the deltas.
func (a *Agent) call(ctx context.Context, key string, params request, model string, emit func(events.Event)) transcript.Message {
	head := transcript.Message{Role: transcript.RoleAssistant, Provider: Provider, Model: model, Timestamp: time.Now().UnixMilli()}
	emit(events.MessageStart{Message: head})

	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	alive := func() {}
	if d := a.opts.IdleTimeout; d > 0 {
		idle := time.AfterFunc(d, func() { cancel(&idleError{d}) })
		defer idle.Stop()
		alive = func() { idle.Reset(d) }
	}
	var acc message
	// The text and thinking deltas of each block, by its index: appending
	// each to a string would copy the text so far, which makes an answer
	// of many deltas cost the square of its length.
	var texts, thoughts []strings.Builder
	var inputs [][]byte // the tool calls' partial JSON, by block
	var header http.Header
	started, stopped := false, false
	err := func() error {
		body, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("anthropic: encoding the request: %w", err)
		}
		resp, err := post(callCtx, a.opts.HTTPClient, a.opts.BaseURL, key, body)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		header = resp.Header
		alive()
		var accErr error
		err = readEvents(resp.Body, func(ev event) bool {
			alive()
			if accErr = accumulate(&acc, &texts, &thoughts, &inputs, ev); accErr != nil {
				return false
			}
			switch ev.Type {
			case "message_start":
				started = true
			case "message_stop":
				stopped = true
				return false
			case "content_block_delta":
				if d, ok := delta(ev); ok {
					emit(events.MessageUpdate{Message: head, Delta: d})
				}
			}
			return true
		})
		if err == nil {
			err = accErr
		}
		return err
	}()
	for i := range acc.Content {
		if i < len(texts) {
			acc.Content[i].Text += texts[i].String()
			acc.Content[i].Thinking += thoughts[i].String()
		}
		if i < len(inputs) && inputs[i] != nil {
			acc.Content[i].Input = inputs[i]
		}
	}
	var idle *idleError
	if !stopped && ctx.Err() == nil && errors.As(context.Cause(callCtx), &idle) {
		err = idle
	}

	var msg transcript.Message
	switch {
	case stopped:
		// The whole message arrived; what the body did after message_stop
		// (a reset, the caller's cancel) does not undo it.
		msg = head
		msg.Content = content(acc, true)
		msg.Usage = usage(acc.Usage)
		msg.StopReason, msg.ErrorType, msg.ErrorMessage = stopReason(acc.StopReason)
	case ctx.Err() != nil:
		msg = head
		msg.StopReason = transcript.StopReasonAborted
		msg.ErrorMessage = "Request was aborted"
		msg.Content = content(acc, false)
		if started {
			msg.Usage = usage(acc.Usage)
		}
	case err != nil:
		msg = failed(header, err)
	default:
		msg = session.FailedMessage(0, nil, nil,
			fmt.Errorf("anthropic: the stream ended before message_stop: %w", io.ErrUnexpectedEOF))
	}
	msg.Provider, msg.Model, msg.Timestamp = Provider, model, time.Now().UnixMilli()
	return msg
}

// accumulate applies the event ev to the message acc, the text and
// thinking deltas to texts and thoughts and the tool calls' partial JSON to
// inputs (by block index), or returns why it cannot.
func accumulate(acc *message, texts, thoughts *[]strings.Builder, inputs *[][]byte, ev event) error {
	switch ev.Type {
	case "message_start":
		if ev.Message == nil {
			return errors.New("anthropic: reading the stream: a message_start without its message")
		}
		*acc = *ev.Message
		*texts, *thoughts, *inputs = nil, nil, nil
	case "message_delta":
		if ev.Delta.StopReason != "" {
			acc.StopReason = ev.Delta.StopReason
		}
		if ev.Usage != nil {
			ev.Usage.apply(&acc.Usage)
		}
	case "content_block_start":
		if ev.ContentBlock == nil {
			return errors.New("anthropic: reading the stream: a content_block_start without its block")
		}
		if ev.Index != int64(len(acc.Content)) {
			return fmt.Errorf("anthropic: reading the stream: content block %d started after %d", ev.Index, len(acc.Content))
		}
		acc.Content = append(acc.Content, *ev.ContentBlock)
	case "content_block_delta":
		if ev.Index < 0 || ev.Index >= int64(len(acc.Content)) {
			return fmt.Errorf("anthropic: reading the stream: a %s for content block %d, of %d started", ev.Delta.Type, ev.Index, len(acc.Content))
		}
		if n := len(acc.Content); len(*texts) < n {
			*texts = append(*texts, make([]strings.Builder, n-len(*texts))...)
			*thoughts = append(*thoughts, make([]strings.Builder, n-len(*thoughts))...)
			*inputs = append(*inputs, make([][]byte, n-len(*inputs))...)
		}
		i := ev.Index
		switch ev.Delta.Type {
		case "text_delta":
			(*texts)[i].WriteString(ev.Delta.Text)
		case "thinking_delta":
			(*thoughts)[i].WriteString(ev.Delta.Thinking)
		case "signature_delta":
			acc.Content[i].Signature += ev.Delta.Signature
		case "input_json_delta":
			if (*inputs)[i] == nil {
				(*inputs)[i] = []byte{}
			}
			(*inputs)[i] = append((*inputs)[i], ev.Delta.PartialJSON...)
		}
	}
	return nil
}

// failed is the message of a call that failed with err: an HTTP error, an
// error event in the stream, or the transport's error; header is the
// stream's, when one came.
//
// The message's Err holds nothing of the request (whose header holds the
// key) or of the body (which ErrorMessage sums up): an error status's is
// the method, the URL with any password masked, the status and the
// request id.
func failed(header http.Header, err error) transcript.Message {
	if m, ok := apicall.Failed(err); ok {
		return m
	}
	var streamErr *streamError
	if errors.As(err, &streamErr) {
		// An error event after the 200: the body's type and message say
		// what failed, the status does not.
		return session.FailedMessage(0, header, streamErr.data, errors.New(streamErr.Error()))
	}
	return session.FailedMessage(0, nil, nil, session.ClipError(err))
}

// stopReason maps the API's stop reason to the session's, with the error
// type and message of one that is a failure.
func stopReason(r string) (transcript.StopReason, string, string) {
	switch r {
	case "tool_use":
		return transcript.StopReasonToolUse, "", ""
	case "max_tokens":
		return transcript.StopReasonLength, "", ""
	case "model_context_window_exceeded":
		return transcript.StopReasonError, "model_context_window_exceeded",
			"model_context_window_exceeded: the response filled the model's context window"
	case "refusal":
		return transcript.StopReasonError, "refusal", "refusal: the model declined to answer"
	}
	// end_turn, stop_sequence, pause_turn and any newer reason.
	return transcript.StopReasonStop, "", ""
}

// delta is the session's delta of a content_block_delta event.
func delta(ev event) (events.Delta, bool) {
	d := events.Delta{Index: int(ev.Index)}
	switch ev.Delta.Type {
	case "text_delta":
		d.Kind, d.Text = "text", ev.Delta.Text
	case "thinking_delta":
		d.Kind, d.Text = "thinking", ev.Delta.Thinking
	case "input_json_delta":
		d.Kind, d.Text = "toolCall", ev.Delta.PartialJSON
	default:
		return d, false
	}
	return d, d.Text != ""
}

// content is the session's blocks of the accumulated message. A tool
// call's arguments that are not a JSON object are {"_raw": text} when the
// message is complete; when not (an aborted call), such a call is left
// out.
func content(m message, complete bool) []transcript.Block {
	var out []transcript.Block
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			out = append(out, transcript.TextBlock(b.Text))
		case "thinking":
			out = append(out, transcript.Block{Type: transcript.BlockThinking, Thinking: b.Thinking, ThinkingSignature: b.Signature})
		case "redacted_thinking":
			out = append(out, transcript.Block{Type: transcript.BlockThinking, Thinking: b.Data, Redacted: true})
		case "tool_use":
			args := json.RawMessage(b.Input)
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			if !isObject(args) {
				if !complete {
					continue
				}
				// What the model wrote, for the tool to see, as the OpenAI
				// adapter keeps it: {} would run the tool as if the model
				// had given no arguments.
				args, _ = json.Marshal(map[string]string{"_raw": string(args)})
			}
			out = append(out, transcript.Block{Type: transcript.BlockToolCall, ID: b.ID, Name: b.Name, Arguments: append(json.RawMessage(nil), args...)})
		}
	}
	return out
}

func isObject(raw json.RawMessage) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal(raw, &v) == nil && v != nil
}

// usage is the session's usage of the API's: a negative count (which no
// server should send) is 0, and the total saturates at math.MaxInt.
func usage(u usageWire) *transcript.Usage {
	out := &transcript.Usage{
		Input:      count(u.InputTokens),
		Output:     count(u.OutputTokens),
		CacheRead:  count(u.CacheReadInputTokens),
		CacheWrite: count(u.CacheCreationInputTokens),
	}
	for _, n := range [...]int{out.Input, out.Output, out.CacheRead, out.CacheWrite} {
		out.TotalTokens += min(n, math.MaxInt-out.TotalTokens)
	}
	return out
}

// count is a token count of the API as an int: at least 0, at most
// math.MaxInt.
func count(n int64) int {
	return int(min(max(n, 0), math.MaxInt))
}
