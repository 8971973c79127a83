package transcript_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentfsm/agentfsm/transcript"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Messages are written in the reference agent's wire shapes, and read back
// equal (issue 13 item 1).
func TestMessageWireShapes(t *testing.T) {
	cases := []struct {
		name string
		m    transcript.Message
		json string
	}{
		{"user string", transcript.Message{ID: "u", Role: transcript.RoleUser, StringContent: true, Content: transcript.TextContent("hi <b> & é")},
			`{"id":"u","role":"user","content":"hi <b> & é","timestamp":0}`},
		{"user empty string", transcript.Message{ID: "u", Role: transcript.RoleUser, StringContent: true},
			`{"id":"u","role":"user","content":"","timestamp":0}`},
		{"user blocks", transcript.Message{ID: "u", Role: transcript.RoleUser, Content: []transcript.Block{
			transcript.TextBlock("look"), {Type: transcript.BlockImage, Data: "iVBORw0KGgo=", MimeType: "image/png"}}},
			`{"id":"u","role":"user","content":[{"type":"text","text":"look"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"timestamp":0}`},
		{"assistant", transcript.Message{ID: "a", Role: transcript.RoleAssistant, Content: []transcript.Block{
			{Type: transcript.BlockThinking, Thinking: "hmm", ThinkingSignature: "sig1"},
			{Type: transcript.BlockThinking, Thinking: "opaque", Redacted: true},
			{Type: transcript.BlockText, Text: "reading", TextSignature: "sig2"},
			{Type: transcript.BlockToolCall, ID: "c1", Name: "read", Arguments: json.RawMessage(`{"path":"<a>&b","n":[1,2.50,{"x":null}]}`)},
		}, StopReason: "toolUse", Usage: &transcript.Usage{Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4, TotalTokens: 10,
			Cost: &transcript.Cost{Input: 0.1, Output: 0.25, Total: 0.35}}, Timestamp: 7},
			`{"id":"a","role":"assistant","content":[{"type":"thinking","thinking":"hmm","thinkingSignature":"sig1"},` +
				`{"type":"thinking","thinking":"opaque","redacted":true},{"type":"text","text":"reading","textSignature":"sig2"},` +
				`{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"<a>&b","n":[1,2.50,{"x":null}]}}],"stopReason":"toolUse",` +
				`"usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"cost":{"input":0.1,"output":0.25,"cacheRead":0,"cacheWrite":0,"total":0.35}},"timestamp":7}`},
		{"tool result", transcript.Message{ID: "r", Role: transcript.RoleToolResult, ToolCallID: "c1", ToolName: "read",
			Content: transcript.TextContent("package a")},
			`{"id":"r","role":"toolResult","content":[{"type":"text","text":"package a"}],"toolCallId":"c1","toolName":"read","isError":false,"timestamp":0}`},
		{"failed tool", transcript.Message{ID: "r", Role: transcript.RoleToolResult, ToolCallID: "c1", ToolName: "read", ToolError: true,
			Content: transcript.TextContent("no such file")},
			`{"id":"r","role":"toolResult","content":[{"type":"text","text":"no such file"}],"toolCallId":"c1","toolName":"read","isError":true,"timestamp":0}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			require.NoError(t, enc.Encode(c.m))
			b := buf.Bytes()
			var back transcript.Message
			require.NoError(t, json.Unmarshal(b, &back))
			assert.Equal(t, c.m, back)
			require.NoError(t, json.Unmarshal([]byte(c.json), &back))
			assert.Equal(t, c.m, back)
			mj, err := c.m.MarshalJSON()
			require.NoError(t, err)
			assert.Equal(t, c.json, string(mj))
		})
	}
}

// Arguments are read compacted, byte for byte otherwise; what is not a
// block or not an object is an error that says so (issue 13 item 1).
func TestBlockDecoding(t *testing.T) {
	var b transcript.Block
	require.NoError(t, json.Unmarshal([]byte(`{"type":"toolCall","id":"c","name":"n","arguments":{ "b" : 1e3 , "a":"\u00e9" }}`), &b))
	assert.Equal(t, `{"b":1e3,"a":"\u00e9"}`, string(b.Arguments))
	require.NoError(t, json.Unmarshal([]byte(`{"type":"toolCall","id":"c","name":"n","arguments":{"a":"\\u003c","b":"\u003c\u0026<"}}`), &b))
	assert.Equal(t, `{"a":"\\u003c","b":"\u003c\u0026<"}`, string(b.Arguments), "escapes are kept as they are")

	bad := []struct{ json, says string }{
		{`{"type":"audio"}`, `unknown content block type "audio"`},
		{`{"type":"toolCall","id":"c","arguments":[1]}`, `tool call "c": arguments are not a JSON object`},
		{`{"type":"toolCall","id":"c"}`, `arguments are not a JSON object`},
		{`{"type":"text","text":5}`, `transcript: text block: field "text": a number where a string was expected`},
	}
	for _, c := range bad {
		err := json.Unmarshal([]byte(c.json), &b)
		require.Error(t, err, c.json)
		assert.Contains(t, err.Error(), c.says, c.json)
	}
	_, err := json.Marshal(transcript.Block{Type: "audio"})
	assert.ErrorContains(t, err, `unknown content block type "audio"`)
	_, err = json.Marshal(transcript.Block{Type: transcript.BlockToolCall, ID: "c", Arguments: json.RawMessage(`"x"`)})
	assert.ErrorContains(t, err, `arguments are not a JSON object`)
	out, err := json.Marshal(transcript.Block{Type: transcript.BlockToolCall, ID: "c", Name: "n"})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"toolCall","id":"c","name":"n","arguments":{}}`, string(out), "nil arguments are an empty object")
}

// A message written before content blocks reads into the new shape
// (issue 13 item 1).
func TestMessageBeforeBlocks(t *testing.T) {
	var m transcript.Message
	require.NoError(t, json.Unmarshal([]byte(`{"id":"u","role":"user","text":"look","images":2,"timestamp":3}`), &m))
	assert.Equal(t, transcript.Message{ID: "u", Role: transcript.RoleUser, Timestamp: 3, Content: []transcript.Block{
		transcript.TextBlock("look"), {Type: transcript.BlockImage}, {Type: transcript.BlockImage}}}, m)
	require.NoError(t, json.Unmarshal([]byte(`{"id":"u","role":"user","text":"hi","timestamp":3}`), &m))
	assert.Equal(t, transcript.Message{ID: "u", Role: transcript.RoleUser, Timestamp: 3, StringContent: true, Content: transcript.TextContent("hi")}, m)
	require.NoError(t, json.Unmarshal([]byte(`{"id":"r","role":"toolResult","text":"out","toolCallId":"a","timestamp":3}`), &m))
	assert.Equal(t, transcript.Message{ID: "r", Role: transcript.RoleToolResult, ToolCallID: "a", Timestamp: 3, Content: transcript.TextContent("out")}, m)
	require.NoError(t, json.Unmarshal([]byte(`{"id":"a","role":"assistant","stopReason":"error","errorMessage":"503","timestamp":3}`), &m))
	assert.Nil(t, m.Content)
	require.NoError(t, json.Unmarshal([]byte(`{"id":"u","role":"user","text":"x","images":-4,"timestamp":3}`), &m))
	assert.Len(t, m.Content, 1, "a garbage image count is ignored")
}

func TestMessageText(t *testing.T) {
	m := transcript.Message{Content: []transcript.Block{transcript.TextBlock("a"), {Type: transcript.BlockThinking, Thinking: "no"}, transcript.TextBlock("b"),
		{Type: transcript.BlockToolCall, ID: "c", Name: "n"}}}
	assert.Equal(t, "ab", m.Text())
	assert.Len(t, m.ToolCalls(), 1)
}

// Errors of the package start with its name and speak its words: which
// block, which field of what, never the codec's internal types (textJSON,
// messageJSON) nor Go's type names.
func TestErrorsInThePackagesWords(t *testing.T) {
	err := transcript.Message{Content: []transcript.Block{transcript.TextBlock("a"), {Type: "audio"}}}.CheckContent()
	assert.EqualError(t, err, `transcript: block 1: unknown content block type "audio"`)

	cases := []struct {
		json string
		into any
		says string
	}{
		{`{"type":"text","text":5}`, new(transcript.Block), `transcript: text block: field "text": a number where a string was expected`},
		{`{"type":"image","data":true}`, new(transcript.Block), `transcript: image block: field "data": a boolean where a string was expected`},
		{`{"type":"thinking","redacted":"yes"}`, new(transcript.Block), `transcript: thinking block: field "redacted": a string where true or false was expected`},
		{`{"type":"toolCall","id":7}`, new(transcript.Block), `transcript: toolCall block: field "id": a number where a string was expected`},
		{`{"type":7}`, new(transcript.Block), `transcript: content block: field "type": a number where a string was expected`},
		{`[1]`, new(transcript.Block), `transcript: content block: an array where an object was expected`},
		{`{"id":"m","role":"assistant","usage":{"input":"many"}}`, new(transcript.Message), `transcript: message: field "usage.input": a string where an integer was expected`},
		{`{"id":5}`, new(transcript.Message), `transcript: message: field "id": a number where a string was expected`},
		{`{"id":"m","role":"user","content":"x","timestamp":1.5}`, new(transcript.Message), `transcript: message: field "timestamp": a number where an integer was expected`},
		{`{"id":"m","content":[{"type":"text","text":[]}]}`, new(transcript.Message), `transcript: message "m": content: block 0: text block: field "text": an array where a string was expected`},
		{`"m"`, new(transcript.Message), `transcript: message: a string where an object was expected`},
	}
	for _, c := range cases {
		err := json.Unmarshal([]byte(c.json), c.into)
		require.Error(t, err, c.json)
		assert.Equal(t, c.says, err.Error(), c.json)
		for _, internal := range []string{"JSON.", "Go ", "struct", "unmarshal"} {
			assert.NotContains(t, err.Error(), internal, c.json)
		}
	}
}

// The block at fault is named by its index, whichever it is.
func TestMessageContentErrorNamesTheBlock(t *testing.T) {
	var m transcript.Message
	err := json.Unmarshal([]byte(`{"id":"m","content":[{"type":"text","text":"a"},{"type":"toolCall","id":"c","arguments":[]}]}`), &m)
	assert.EqualError(t, err, `transcript: message "m": content: block 1: tool call "c": arguments are not a JSON object`)
	err = json.Unmarshal([]byte(`{"id":"m","content":{"type":"text"}}`), &m)
	assert.EqualError(t, err, `transcript: message "m": content: an object where an array was expected`)
}
