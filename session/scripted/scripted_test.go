package scripted_test

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

func TestParse(t *testing.T) {
	s, err := scripted.Parse([]byte(`{
		"model": {"provider": "scripted", "id": "scripted-1", "contextWindow": 200000},
		"calls": [
			{"stopReason": "error", "errorMessage": "503 Service Unavailable", "latencyMs": 50},
			{"stopReason": "toolUse", "text": "reading a file"},
			{"stopReason": "stop", "text": "done", "usage": {"input": 1200, "output": 40}},
			{"refuse": "no key"}
		]}`))
	require.NoError(t, err)
	assert.Equal(t, 200000, s.Model.ContextWindow)
	require.Len(t, s.Calls, 4)
	assert.Equal(t, int64(50), s.Calls[0].LatencyMs)
	assert.Equal(t, 1200, s.Calls[2].Usage.Input)

	s, err = scripted.Parse([]byte(`{"calls":[]}`))
	require.NoError(t, err)
	assert.Equal(t, scripted.DefaultModel, s.Model)

	bad := []struct{ json, says string }{
		{`{"calls":[{"stopReason":"crash"}]}`, `calls[0].stopReason "crash"`},
		{`{"calls":[{"stopReason":"stop","latencyMs":-1}]}`, "calls[0].latencyMs"},
		{`{"calls":[{"stopReason":"error"}]}`, "calls[0] is an error with no errorMessage"},
		{`{"calls":[{"stopReason":"stop","colour":"red"}]}`, `unknown field "colour"`},
		{`{"model":{"contextWindow":-1}}`, "contextWindow"},
		{`{"calls":`, "invalid script"},
		{`{} []`, "text after"},
	}
	for _, c := range bad {
		_, err := scripted.Parse([]byte(c.json))
		require.Error(t, err, c.json)
		assert.Contains(t, err.Error(), c.says, c.json)
	}
}

// collect runs one run and returns its events.
func collect(t *testing.T, a *scripted.Agent, ctx context.Context) ([]events.Event, error) {
	var evs []events.Event
	err := a.Run(ctx, session.RunRequest{Model: scripted.DefaultModel}, func(ev events.Event) { evs = append(evs, ev) })
	return evs, err
}

func types(evs []events.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, rpc.EventType(e))
	}
	return out
}

func TestRunWithTools(t *testing.T) {
	a := scripted.New(scripted.Script{Calls: []scripted.Call{{StopReason: "toolUse", Text: "ls"}, {StopReason: "stop", Text: "done"}}})
	evs, err := collect(t, a, context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{
		"agent_start",
		"turn_start", "message_start", "message_end", "message_start", "message_end", "turn_end",
		"turn_start", "message_start", "message_end", "turn_end",
		"agent_end",
	}, types(evs))
	end := evs[len(evs)-1].(events.AgentEnd)
	require.Len(t, end.Messages, 3)
	assert.Equal(t, transcript.RoleToolResult, end.Messages[1].Role)
	assert.Equal(t, end.Messages[0].ID, end.Messages[1].ToolCallID)
	assert.Equal(t, 0, a.Remaining())
	// Past the script: every call answers ok.
	evs, err = collect(t, a, context.Background())
	require.NoError(t, err)
	assert.Equal(t, "ok", evs[len(evs)-1].(events.AgentEnd).Messages[0].Text())
}

func TestRunRefuses(t *testing.T) {
	a := scripted.New(scripted.Script{Calls: []scripted.Call{{Refuse: "no key"}}})
	evs, err := collect(t, a, context.Background())
	assert.EqualError(t, err, "no key")
	assert.Empty(t, evs)
}

func TestRunAbortedDuringLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := scripted.New(scripted.Script{Calls: []scripted.Call{{StopReason: "stop", LatencyMs: 5000}}})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Second); cancel() }()
		start := time.Now()
		evs, err := collect(t, a, ctx)
		require.NoError(t, err)
		assert.Equal(t, time.Second, time.Since(start))
		end := evs[len(evs)-1].(events.AgentEnd)
		assert.Equal(t, "aborted", string(end.Messages[0].StopReason))
	})
}

// issue item 19: a call whose usage is given without totalTokens reports
// the sum of its parts, without changing the script; a given totalTokens
// is kept.
func TestRunFillsTotalTokens(t *testing.T) {
	given := &transcript.Usage{Input: 1200, Output: 40, CacheRead: 7, CacheWrite: 3}
	kept := &transcript.Usage{Input: 10, Output: 5, TotalTokens: 99}
	huge := &transcript.Usage{Input: math.MaxInt, Output: math.MaxInt}
	a := scripted.New(scripted.Script{Calls: []scripted.Call{
		{StopReason: "toolUse", Text: "ls", Usage: given},
		{StopReason: "toolUse", Text: "ls", Usage: kept},
		{StopReason: "toolUse", Text: "ls", Usage: huge},
		{StopReason: "stop", Text: "done"},
	}})
	evs, err := collect(t, a, context.Background())
	require.NoError(t, err)
	end := evs[len(evs)-1].(events.AgentEnd)
	require.Len(t, end.Messages, 7)
	assert.Equal(t, transcript.Usage{Input: 1200, Output: 40, CacheRead: 7, CacheWrite: 3, TotalTokens: 1250}, *end.Messages[0].Usage)
	assert.Equal(t, transcript.Usage{Input: 10, Output: 5, TotalTokens: 99}, *end.Messages[2].Usage)
	assert.Equal(t, math.MaxInt, end.Messages[4].Usage.TotalTokens, "the sum saturates")
	assert.Equal(t, transcript.Usage{Input: 100, Output: 20, TotalTokens: 120}, *end.Messages[6].Usage, "the default")
	assert.Zero(t, given.TotalTokens, "the script is not changed")

	// An aborted call reports its usage so far, with its total.
	synctest.Test(t, func(t *testing.T) {
		a := scripted.New(scripted.Script{Calls: []scripted.Call{{StopReason: "stop", LatencyMs: 5000, Usage: &transcript.Usage{Input: 8, Output: 2}}}})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Second); cancel() }()
		evs, err := collect(t, a, ctx)
		require.NoError(t, err)
		m := evs[len(evs)-1].(events.AgentEnd).Messages[0]
		assert.Equal(t, "aborted", string(m.StopReason))
		assert.Equal(t, 10, m.Usage.TotalTokens)
	})
}

// The script's numbers are checked: a negative usage count is refused, and
// a latency too long for a Duration waits the longest one instead of none.
func TestParseRefusesNegativeUsage(t *testing.T) {
	for _, key := range []string{"input", "output", "cacheRead", "cacheWrite", "totalTokens"} {
		_, err := scripted.Parse([]byte(`{"calls":[{"stopReason":"stop"},{"stopReason":"stop","usage":{"` + key + `":-1}}]}`))
		assert.ErrorContains(t, err, "calls[1].usage."+key+" must not be negative", key)
	}
}

func TestRunHugeLatencyWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := scripted.New(scripted.Script{Calls: []scripted.Call{{StopReason: "stop", LatencyMs: math.MaxInt64}}})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(1000 * time.Hour); cancel() }()
		start := time.Now()
		evs, err := collect(t, a, ctx)
		require.NoError(t, err)
		assert.Equal(t, 1000*time.Hour, time.Since(start), "the call waited until the abort")
		assert.Equal(t, "aborted", string(evs[len(evs)-1].(events.AgentEnd).Messages[0].StopReason))
	})
}

// A script's answers carry content blocks: thinking, tool calls with their
// arguments, and tool results with images, one result per call; a script
// written before content blocks runs as it did (issue 13 item 1).
func TestRunWithBlocks(t *testing.T) {
	s, err := scripted.Parse([]byte(`{"calls":[
		{"stopReason":"toolUse","content":[
			{"type":"thinking","thinking":"look first","thinkingSignature":"c2ln"},
			{"type":"toolCall","id":"t1","name":"read","arguments":{"path":"a.go","n":[1,2.50]}},
			{"type":"toolCall","id":"t2","name":"shot","arguments":{}}
		],"toolResults":[{"content":[{"type":"text","text":"package a"}]}]},
		{"stopReason":"toolUse","content":[{"type":"toolCall","id":"t3","name":"screenshot","arguments":{}}],
		 "toolResults":[{"content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"isError":true}]},
		{"stopReason":"stop","text":"done"}
	]}`))
	require.NoError(t, err)
	evs, err := collect(t, scripted.New(s), context.Background())
	require.NoError(t, err)
	msgs := evs[len(evs)-1].(events.AgentEnd).Messages
	require.Len(t, msgs, 6)
	assert.Equal(t, `{"path":"a.go","n":[1,2.50]}`, string(msgs[0].Content[1].Arguments))
	assert.Equal(t, transcript.BlockThinking, msgs[0].Content[0].Type)
	assert.Equal(t, []transcript.Message{
		{ID: msgs[1].ID, Role: transcript.RoleToolResult, ToolCallID: "t1", ToolName: "read", Content: transcript.TextContent("package a"), Timestamp: msgs[1].Timestamp},
		{ID: msgs[2].ID, Role: transcript.RoleToolResult, ToolCallID: "t2", ToolName: "shot", Content: transcript.TextContent("result of: shot"), Timestamp: msgs[2].Timestamp},
	}, msgs[1:3])
	assert.NotEqual(t, msgs[1].ID, msgs[2].ID)
	assert.True(t, msgs[4].ToolError)
	assert.Equal(t, transcript.BlockImage, msgs[4].Content[0].Type)
	assert.Equal(t, "done", msgs[5].Text())

	bad := []struct{ json, says string }{
		{`{"calls":[{"stopReason":"stop","toolResults":[{"content":[]}]}]}`, `calls[0] has toolResults but stopReason "stop"`},
		{`{"calls":[{"stopReason":"toolUse","toolResults":[{"content":[]}]}]}`, "calls[0] has 1 toolResults for 0 toolCall blocks"},
		{`{"calls":[{"stopReason":"stop","content":[{"type":"audio"}]}]}`, `unknown content block type "audio"`},
	}
	for _, c := range bad {
		_, err := scripted.Parse([]byte(c.json))
		require.Error(t, err, c.json)
		assert.Contains(t, err.Error(), c.says, c.json)
	}
}
