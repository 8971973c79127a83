// Package scripted is a stand-in for a model provider: a session.Agent that
// answers each model call from a script. The demo, the RPC server and the
// tests run on it; it makes no network call.
//
// It is not a model: it never reads the messages it is sent, only counts
// them.
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// Script is what the agent answers, as JSON:
//
//	{
//	  "model": {"provider": "scripted", "id": "scripted-1", "contextWindow": 200000},
//	  "calls": [
//	    {"stopReason": "error", "errorMessage": "503 Service Unavailable", "latencyMs": 50},
//	    {"stopReason": "toolUse", "text": "reading a file"},
//	    {"stopReason": "toolUse", "content": [
//	      {"type": "thinking", "thinking": "look first", "thinkingSignature": "c2ln"},
//	      {"type": "toolCall", "id": "t1", "name": "read", "arguments": {"path": "a.go"}}
//	    ], "toolResults": [{"content": [{"type": "text", "text": "package a"}]}]},
//	    {"stopReason": "stop", "text": "done", "usage": {"input": 1200, "output": 40}}
//	  ]
//	}
type Script struct {
	Model policy.Model `json:"model"`
	Calls []Call       `json:"calls"`
}

// Call is the answer to one model call. Each call takes the next entry;
// once they run out, every call answers {"stopReason":"stop","text":"ok"}.
type Call struct {
	// StopReason is the answer's: stop, toolUse, length or error. toolUse
	// makes the run execute a stand-in tool and call the model again
	// within the same run.
	StopReason transcript.StopReason `json:"stopReason"`
	// Text is the answer's text, when Content is empty.
	Text string `json:"text,omitempty"`
	// Content is the answer's content blocks (text, thinking, tool calls,
	// images) in their wire shapes; it wins over Text.
	Content []transcript.Block `json:"content,omitempty"`
	// ToolResults are the results of a toolUse answer's tool calls, by
	// position: the first answers the first toolCall block, and so on. A
	// call without one gets the text "result of: <name>". A toolUse
	// answer without toolCall blocks (a script written before content
	// blocks) gets one result, "result of: <text>", whose toolCallId is
	// the answer's message ID.
	ToolResults []ToolResult `json:"toolResults,omitempty"`
	// ErrorMessage is the error text of an "error" answer.
	ErrorMessage string `json:"errorMessage,omitempty"`
	// LatencyMs is how long the call takes before it answers (at most the
	// longest time.Duration). An abort during that time ends the call with
	// stopReason "aborted" (and the call's usage, as reported so far).
	LatencyMs int64 `json:"latencyMs,omitempty"`
	// Usage defaults to {"input":100,"output":20,"totalTokens":120}. A
	// usage without totalTokens (or with 0) is reported with totalTokens
	// the sum of input, output, cacheRead and cacheWrite, saturating at
	// the largest int, as a provider reports it; the script itself is not
	// changed.
	Usage *transcript.Usage `json:"usage,omitempty"`
	// Typed error facts, as a provider client would know them.
	Status    int               `json:"status,omitempty"`
	ErrorType string            `json:"errorType,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	// Refuse, when set, makes the run that would make this call fail to
	// start with this error, before any model call (the entry is used up).
	Refuse string `json:"refuse,omitempty"`
}

// ToolResult is the result of one scripted tool call.
type ToolResult struct {
	// Content is the result's text and image blocks.
	Content []transcript.Block `json:"content"`
	IsError bool               `json:"isError,omitempty"`
}

// DefaultModel is the model of a script that names none.
var DefaultModel = policy.Model{Provider: "scripted", ID: "scripted-1", ContextWindow: 200000}

var stopReasons = map[transcript.StopReason]bool{
	transcript.StopReasonStop: true, transcript.StopReasonToolUse: true, transcript.StopReasonLength: true, transcript.StopReasonError: true,
}

// Parse reads a script. Unknown keys, an unknown stopReason and negative
// numbers (a latency, a usage count) are errors that name the call and key.
func Parse(data []byte) (Script, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("scripted: invalid script: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Script{}, errors.New("scripted: invalid script: text after the script object")
	}
	if s.Model == (policy.Model{}) {
		s.Model = DefaultModel
	}
	if s.Model.ContextWindow < 0 {
		return Script{}, errors.New("scripted: invalid script: model.contextWindow must not be negative")
	}
	for i, c := range s.Calls {
		if c.Refuse != "" {
			continue
		}
		switch {
		case !stopReasons[c.StopReason]:
			return Script{}, fmt.Errorf("scripted: invalid script: calls[%d].stopReason %q (want stop, toolUse, length or error)", i, c.StopReason)
		case c.LatencyMs < 0:
			return Script{}, fmt.Errorf("scripted: invalid script: calls[%d].latencyMs must not be negative", i)
		case c.StopReason == transcript.StopReasonError && c.ErrorMessage == "" && c.Status == 0 && c.ErrorType == "":
			return Script{}, fmt.Errorf("scripted: invalid script: calls[%d] is an error with no errorMessage, status or errorType", i)
		case len(c.ToolResults) > 0 && c.StopReason != transcript.StopReasonToolUse:
			return Script{}, fmt.Errorf("scripted: invalid script: calls[%d] has toolResults but stopReason %q (want toolUse)", i, c.StopReason)
		case len(c.ToolResults) > len(toolCalls(c.Content)):
			return Script{}, fmt.Errorf("scripted: invalid script: calls[%d] has %d toolResults for %d toolCall blocks", i, len(c.ToolResults), len(toolCalls(c.Content)))
		}
		if u := c.Usage; u != nil {
			for _, f := range []struct {
				key string
				n   int
			}{{"input", u.Input}, {"output", u.Output}, {"cacheRead", u.CacheRead}, {"cacheWrite", u.CacheWrite}, {"totalTokens", u.TotalTokens}} {
				if f.n < 0 {
					return Script{}, fmt.Errorf("scripted: invalid script: calls[%d].usage.%s must not be negative", i, f.key)
				}
			}
		}
	}
	return s, nil
}

// Agent answers model calls from a script. It is safe for concurrent use,
// though a session runs it one run at a time.
type Agent struct {
	model policy.Model

	mu    sync.Mutex
	calls []Call
	next  int
	ids   int
}

// New returns an agent that plays s.
func New(s Script) *Agent {
	return &Agent{model: s.Model, calls: append([]Call(nil), s.Calls...)}
}

// Model returns the script's model.
func (a *Agent) Model() policy.Model { return a.model }

// Remaining returns how many scripted calls are left.
func (a *Agent) Remaining() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.calls) - a.next
}

// Append adds calls at the end of the script.
func (a *Agent) Append(calls ...Call) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, calls...)
}

// take returns the next call, or the default answer when they ran out.
func (a *Agent) take() (Call, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids++
	id := "call-" + strconv.Itoa(a.ids)
	if a.next >= len(a.calls) {
		return Call{StopReason: transcript.StopReasonStop, Text: "ok"}, id
	}
	c := a.calls[a.next]
	a.next++
	return c, id
}

// refusal uses up the next call when it refuses to start, and returns its
// error.
func (a *Agent) refusal() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next < len(a.calls) && a.calls[a.next].Refuse != "" {
		reason := a.calls[a.next].Refuse
		a.next++
		return errors.New(reason)
	}
	return nil
}

// Run implements session.Agent.
func (a *Agent) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	if err := a.refusal(); err != nil {
		return err
	}
	if err := context.Cause(ctx); ctx.Err() != nil {
		return err
	}
	emit(events.AgentStart{})
	var made []transcript.Message
	for {
		call, id := a.take()
		emit(events.CallStart{})
		msg := transcript.Message{ID: id, Role: transcript.RoleAssistant, Provider: req.Model.Provider, Model: req.Model.ID, Timestamp: time.Now().UnixMilli()}
		emit(events.MessageStart{Message: msg})
		aborted := wait(ctx, latency(call.LatencyMs))
		msg.Timestamp = time.Now().UnixMilli()
		if aborted {
			// The usage reported before the abort, as a provider streams it.
			msg.StopReason = transcript.StopReasonAborted
			msg.ErrorMessage = "Request was aborted"
			msg.Usage = withTotal(call.Usage, transcript.Usage{})
		} else {
			msg.StopReason = call.StopReason
			msg.Content = content(call)
			msg.ErrorMessage = call.ErrorMessage
			msg.HTTPStatus, msg.ErrorType, msg.Headers = call.Status, call.ErrorType, call.Headers
			msg.Usage = withTotal(call.Usage, transcript.Usage{Input: 100, Output: 20})
		}
		emit(events.MessageEnd{Message: msg})
		made = append(made, msg)
		if msg.StopReason != transcript.StopReasonToolUse {
			emit(events.CallEnd{})
			break
		}
		for _, result := range results(call, id) {
			result.Timestamp = time.Now().UnixMilli()
			emit(events.MessageStart{Message: result})
			emit(events.MessageEnd{Message: result})
			made = append(made, result)
		}
		emit(events.CallEnd{})
	}
	emit(events.AgentEnd{Messages: made})
	return nil
}

// content is the content of a call's answer: its blocks, or its text.
func content(c Call) []transcript.Block {
	if len(c.Content) > 0 {
		return append([]transcript.Block(nil), c.Content...)
	}
	if c.Text != "" {
		return transcript.TextContent(c.Text)
	}
	return nil
}

// toolCalls are the toolCall blocks of content.
func toolCalls(content []transcript.Block) []transcript.Block {
	var calls []transcript.Block
	for _, b := range content {
		if b.Type == transcript.BlockToolCall {
			calls = append(calls, b)
		}
	}
	return calls
}

// results are the tool results of the toolUse answer c, whose message has
// this ID.
func results(c Call, id string) []transcript.Message {
	calls := toolCalls(c.Content)
	if len(calls) == 0 {
		return []transcript.Message{{ID: "tool-" + id, Role: transcript.RoleToolResult, ToolCallID: id,
			Content: transcript.TextContent("result of: " + c.Text)}}
	}
	out := make([]transcript.Message, len(calls))
	for i, call := range calls {
		r := ToolResult{Content: transcript.TextContent("result of: " + call.Name)}
		if i < len(c.ToolResults) {
			r = c.ToolResults[i]
		}
		out[i] = transcript.Message{ID: "tool-" + id + "-" + strconv.Itoa(i+1), Role: transcript.RoleToolResult,
			ToolCallID: call.ID, ToolName: call.Name, Content: append([]transcript.Block(nil), r.Content...), ToolError: r.IsError}
	}
	return out
}

// withTotal returns a copy of u (def when u is nil) whose TotalTokens, when
// 0, is the sum of its parts, saturating at math.MaxInt.
func withTotal(u *transcript.Usage, def transcript.Usage) *transcript.Usage {
	out := def
	if u != nil {
		out = *u
	}
	if out.TotalTokens == 0 {
		for _, n := range [...]int{out.Input, out.Output, out.CacheRead, out.CacheWrite} {
			out.TotalTokens += min(max(n, 0), math.MaxInt-out.TotalTokens)
		}
	}
	return &out
}

// latency converts a call's LatencyMs to a Duration, saturating.
func latency(ms int64) time.Duration {
	return time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
}

// wait waits d, and reports true when ctx ended first.
func wait(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return true
	}
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return false
	case <-ctx.Done():
		return true
	}
}
