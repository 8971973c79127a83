// Package openai is a session.Agent over OpenAI's Chat Completions API,
// spoken over net/http (POST chat/completions, streamed as server-sent
// events): no SDK is linked. It works with
// any server that speaks that API at a base URL: OpenAI, Ollama, vLLM,
// llama.cpp, OpenRouter, Together, Groq.
//
// The session owns retrying: the agent never retries a call, and a failed
// call is reported as an assistant message with stop reason "error" whose
// typed fields (HTTP status, error type, hint headers, request id, Go
// error) the session's classifier reads (docs/providers.md, "OpenAI").
// The API key is resolved at each run from the credential the session
// hands the agent, so no secret is ever held in a message, an event or a
// log.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/httpsafe"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// DefaultProvider is the provider name of an Agent whose Options name none.
const DefaultProvider = "openai"

// Options configure an Agent. Of the OPENAI_* environment variables the
// official SDKs read, the agent reads OPENAI_BASE_URL (when BaseURL is
// empty), OPENAI_ORG_ID and OPENAI_PROJECT_ID (sent as the
// OpenAI-Organization and OpenAI-Project headers); the key is the one
// Secrets resolves, never OPENAI_API_KEY unless the resolver reads it.
type Options struct {
	// Model is the model ID sent with each request (such as
	// "gpt-4o-mini", or "llama3.2" on Ollama); empty means the session's
	// model (RunRequest.Model.ID). A run whose RunRequest.Model is of this
	// agent's Provider and names a model calls that one instead: the
	// session's fallback model (docs/policy.md §3.9).
	Model string
	// MaxTokens bounds each answer (max_completion_tokens); 0 leaves it to
	// the server.
	MaxTokens int64
	// BaseURL is the API's base URL, ending in /v1/ (such as
	// "http://localhost:11434/v1/" for Ollama), the requests going to its
	// chat/completions; empty means OPENAI_BASE_URL, else DefaultBaseURL.
	BaseURL string
	// HTTPClient makes the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Provider names the provider in the session's model, its messages and
	// the credential looked up when the session hands none; empty means
	// DefaultProvider. Name a compatible server ("ollama", "groq") so its
	// credentials and usage limits are its own.
	Provider string
	// Secrets turns the run's credential into the API key; nil means
	// credentials.EnvSecrets{} (a credential's "env:NAME", or OPENAI_API_KEY
	// for provider "openai"). A server that needs no key still needs a
	// resolver that returns some string: the agent always sends a key.
	Secrets credentials.SecretResolver
	// Tools are the tools the model may call.
	Tools []Tool
	// ContextWindows adds to and overrides DefaultContextWindows, by model
	// ID.
	ContextWindows map[string]int
	// IdleTimeout ends a model call that receives nothing (no headers, no
	// chunk: a comment, an event of another kind or a trickle of bytes
	// inside one event does not count) for this long, as a transient
	// failure the session retries; 0 means DefaultIdleTimeout, a negative
	// value no limit. A stream that keeps sending chunks is bounded by the
	// caller's context.
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
// enough for a reasoning model's silence before its first token.
const DefaultIdleTimeout = 5 * time.Minute

// Tool is a function the model may call: its name, what it does, the JSON
// schema of its arguments (an object schema; nil means no arguments) and
// the Go function that runs it. Run gets the arguments as the model wrote
// them (a JSON object; {"_raw": text} when the model wrote something else)
// and returns the result's text; an error (or a panic) becomes a tool
// result with isError set, holding the error's text. Run must return when
// ctx ends: the run, and the session's Abort, wait for it. The tools of
// one run are called one at a time, but an Agent shared by sessions may
// call a tool from several runs at once.
type Tool struct {
	Name        string
	Description string
	Schema      json.RawMessage
	Run         func(ctx context.Context, args json.RawMessage) (string, error)
}

// DefaultContextWindows are the context windows, in tokens, of the models
// the package knows. A model ID matches its entry, or the longest entry it
// extends with "-" (a dated version: "gpt-4o-2024-08-06" is "gpt-4o").
var DefaultContextWindows = map[string]int{
	"gpt-5":         400_000,
	"gpt-5-mini":    400_000,
	"gpt-5-nano":    400_000,
	"gpt-4.1":       1_047_576,
	"gpt-4.1-mini":  1_047_576,
	"gpt-4.1-nano":  1_047_576,
	"gpt-4o":        128_000,
	"gpt-4o-mini":   128_000,
	"gpt-4-turbo":   128_000,
	"gpt-4":         8_192,
	"gpt-3.5-turbo": 16_385,
	"o1":            200_000,
	"o1-mini":       128_000,
	"o3":            200_000,
	"o3-mini":       200_000,
	"o4-mini":       200_000,
}

// Agent is a session.Agent over Chat Completions. It is safe for
// concurrent use by several sessions.
type Agent struct {
	opts Options
}

// New returns an agent with opts.
func New(opts Options) *Agent {
	if opts.Provider == "" {
		opts.Provider = DefaultProvider
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxToolRounds == 0 {
		opts.MaxToolRounds = DefaultMaxToolRounds
	}
	if opts.Secrets == nil {
		opts.Secrets = credentials.EnvSecrets{}
	}
	opts.Tools = append([]Tool(nil), opts.Tools...)
	windows := make(map[string]int, len(opts.ContextWindows))
	for id, w := range opts.ContextWindows {
		windows[id] = w
	}
	opts.ContextWindows = windows
	return &Agent{opts: opts}
}

// Model returns the session's model: the provider, Options.Model, its
// context window (0 when unknown: then threshold compaction never runs)
// and Options.BaseURL, any password in it masked (the model goes into the
// session's state, its snapshots and the RPC server's answers). Give it to
// session.WithModel.
func (a *Agent) Model() policy.Model {
	return policy.Model{Provider: a.opts.Provider, ID: a.opts.Model, ContextWindow: a.contextWindow(a.opts.Model), BaseURL: httpsafe.RedactURL(a.opts.BaseURL)}
}

// contextWindow looks id up in the user's table, then the default one.
func (a *Agent) contextWindow(id string) int {
	if w, ok := lookupWindow(a.opts.ContextWindows, id); ok {
		return w
	}
	w, _ := lookupWindow(DefaultContextWindows, id)
	return w
}

func lookupWindow(table map[string]int, id string) (int, bool) {
	if w, ok := table[id]; ok {
		return w, true
	}
	best, found := "", false
	for name := range table {
		if strings.HasPrefix(id, name+"-") && len(name) > len(best) {
			best, found = name, true
		}
	}
	return table[best], found
}

// Run implements session.Agent: it calls the model, runs the tools the
// model asks for and calls it again with their results, until the model
// stops, fails or ctx ends. A run that cannot start (no secret, a tool
// schema that is not a JSON object) returns an error without emitting.
func (a *Agent) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	cred := policy.Credential{Provider: a.opts.Provider}
	if req.Credential != nil {
		cred = *req.Credential
	}
	key, err := a.opts.Secrets.Resolve(ctx, cred)
	if err != nil {
		return fmt.Errorf("openai: resolving the API key: %w", err)
	}
	// A server that echoes the key back gets it redacted by the session.
	session.NoteSecret(ctx, key)
	tools, err := a.toolParams()
	if err != nil {
		return err
	}
	model := a.opts.Model
	if model == "" || (req.Model.Provider == a.opts.Provider && req.Model.ID != "") {
		model = req.Model.ID
	}
	if model == "" {
		return errors.New("openai: no model: set Options.Model or the session's model")
	}
	if err := context.Cause(ctx); ctx.Err() != nil {
		return err
	}
	params := request{
		Model:               model,
		Messages:            messages(req.Context, a.opts.Provider, model),
		Tools:               tools,
		MaxCompletionTokens: max(a.opts.MaxTokens, 0),
		Stream:              true,
		StreamOptions:       streamOptions{IncludeUsage: true},
	}
	c := call{agent: a, key: key, model: model, emit: emit}

	emit(events.AgentStart{})
	var made []transcript.Message
	for rounds := 0; ; rounds++ {
		emit(events.CallStart{})
		var m transcript.Message
		if capped := a.opts.MaxToolRounds; capped > 0 && rounds >= capped {
			m = toolRoundsExceeded(capped)
			m.Provider, m.Model, m.Timestamp = a.opts.Provider, model, now()
			emit(events.MessageStart{Message: m})
		} else {
			m = c.do(ctx, params)
		}
		emit(events.MessageEnd{Message: m})
		made = append(made, m)
		if m.StopReason != transcript.StopReasonToolUse {
			emit(events.CallEnd{})
			break
		}
		results := a.runTools(ctx, m)
		for _, r := range results {
			emit(events.MessageStart{Message: r})
			emit(events.MessageEnd{Message: r})
			made = append(made, r)
		}
		emit(events.CallEnd{})
		params.Messages = append(params.Messages, messages(append([]transcript.Message{m}, results...), a.opts.Provider, model)...)
	}
	emit(events.AgentEnd{Messages: made})
	return nil
}

// toolParams are the tools as the API takes them.
func (a *Agent) toolParams() ([]toolParam, error) {
	var out []toolParam
	for _, t := range a.opts.Tools {
		if t.Name == "" || t.Run == nil {
			return nil, fmt.Errorf("openai: tool %q: a tool needs a name and a Run function", t.Name)
		}
		schema := map[string]any{"type": "object", "properties": map[string]any{}}
		if len(t.Schema) > 0 {
			schema = nil
			if err := json.Unmarshal(t.Schema, &schema); err != nil || schema == nil {
				return nil, fmt.Errorf("openai: tool %q: the schema is not a JSON object", t.Name)
			}
		}
		out = append(out, toolParam{Type: "function", Function: functionDef{Name: t.Name, Description: t.Description, Parameters: schema}})
	}
	return out, nil
}

// toolRoundsExceeded is the message that ends a run at its cap of
// capped tool rounds.
func toolRoundsExceeded(capped int) transcript.Message {
	err := fmt.Errorf("openai: the run reached its cap of %d tool rounds (Options.MaxToolRounds) and the model still calls tools", capped)
	m := session.FailedMessage(0, nil, nil, err)
	m.ErrorType = ErrorTypeToolRounds
	m.ErrorMessage = err.Error()
	return m
}

// runTools runs the tool calls of m, in order, and returns their results.
func (a *Agent) runTools(ctx context.Context, m transcript.Message) []transcript.Message {
	var out []transcript.Message
	for _, b := range m.Content {
		if b.Type != transcript.BlockToolCall {
			continue
		}
		text, err := a.runTool(ctx, b)
		r := transcript.Message{Role: transcript.RoleToolResult, ToolCallID: b.ID, ToolName: b.Name, Content: transcript.TextContent(text), Timestamp: now()}
		if err != nil {
			r.Content, r.ToolError = transcript.TextContent(err.Error()), true
		}
		out = append(out, r)
	}
	return out
}

// runTool runs one call; a panic of the tool is its error.
func (a *Agent) runTool(ctx context.Context, b transcript.Block) (text string, err error) {
	var tool *Tool
	for i := range a.opts.Tools {
		if a.opts.Tools[i].Name == b.Name {
			tool = &a.opts.Tools[i]
			break
		}
	}
	if tool == nil {
		return "", fmt.Errorf("openai: no tool named %q", b.Name)
	}
	if err := context.Cause(ctx); ctx.Err() != nil {
		return "", fmt.Errorf("openai: tool %q not run: %w", b.Name, err)
	}
	defer func() {
		if r := recover(); r != nil {
			text, err = "", fmt.Errorf("openai: tool %q panicked: %v", b.Name, r)
		}
	}()
	args := b.Arguments
	if args == nil {
		args = json.RawMessage("{}")
	}
	return tool.Run(ctx, args)
}
