package anthropic

import (
	"encoding/json"
	"fmt"

	"github.com/agentfsm/agentfsm/transcript"
)

// summaryPrefix introduces a compaction's summary to the model.
const summaryPrefix = "The conversation before this point was compacted into the following summary:\n\n"

// messageParams converts the session's context to the API's messages:
//
//   - a user message, a tool result and a compaction summary are user
//     turns (a summary as text after summaryPrefix), consecutive ones
//     merged into one message, as the API wants a tool call's results in
//     the user message right after it;
//   - an assistant message is an assistant turn of its text, thinking
//     (signed, or redacted) and tool call blocks; a failed or aborted one
//     is left out, and so is an empty one; thinking without a signature,
//     or of another provider's message (whose signature the API would
//     refuse), goes as text, and another provider's redacted thinking is
//     left out;
//   - a tool call whose result is missing gets an error result, so the
//     request stays valid after a run stopped between the two.
func messageParams(ms []transcript.Message) ([]messageParam, error) {
	type turn struct {
		user   bool
		blocks []any
	}
	var turns []turn
	var pending []transcript.Block // tool calls of the last assistant turn without a result yet
	add := func(user bool, blocks ...any) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].user == user {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, turn{user, blocks})
	}
	flush := func() {
		for _, c := range pending {
			add(true, toolResultParam{Type: "tool_result", ToolUseID: c.ID, IsError: true, Content: []any{newText("No result was provided.")}})
		}
		pending = nil
	}
	for i, m := range ms {
		switch m.Role {
		case transcript.RoleToolResult:
			block, err := toolResult(m)
			if err != nil {
				return nil, fmt.Errorf("anthropic: message %d: %w", i, err)
			}
			for j, c := range pending {
				if c.ID == m.ToolCallID {
					pending = append(pending[:j:j], pending[j+1:]...)
					break
				}
			}
			add(true, block)
		case transcript.RoleUser, transcript.RoleSummary:
			flush()
			blocks, err := userBlocks(m)
			if err != nil {
				return nil, fmt.Errorf("anthropic: message %d: %w", i, err)
			}
			add(true, blocks...)
		case transcript.RoleAssistant:
			flush()
			if m.StopReason == transcript.StopReasonError || m.StopReason == transcript.StopReasonAborted {
				continue
			}
			blocks, calls, err := assistantBlocks(m)
			if err != nil {
				return nil, fmt.Errorf("anthropic: message %d: %w", i, err)
			}
			add(false, blocks...)
			if len(blocks) > 0 {
				pending = calls
			}
		default:
			return nil, fmt.Errorf("anthropic: message %d: unknown role %q", i, m.Role)
		}
	}
	flush()
	out := make([]messageParam, len(turns))
	for i, t := range turns {
		out[i] = messageParam{Role: "assistant", Content: t.blocks}
		if t.user {
			out[i].Role = "user"
		}
	}
	return out, nil
}

func userBlocks(m transcript.Message) ([]any, error) {
	var out []any
	for _, b := range m.Content {
		switch b.Type {
		case transcript.BlockText:
			text := b.Text
			if m.Role == transcript.RoleSummary {
				text = summaryPrefix + text
			}
			if text != "" {
				out = append(out, newText(text))
			}
		case transcript.BlockImage:
			out = append(out, newImage(b.MimeType, b.Data))
		default:
			return nil, fmt.Errorf("a %s message cannot hold a block of type %q", m.Role, b.Type)
		}
	}
	return out, nil
}

func assistantBlocks(m transcript.Message) (blocks []any, calls []transcript.Block, err error) {
	// A message with no provider is taken as this one's.
	own := m.Provider == "" || m.Provider == Provider
	for _, b := range m.Content {
		switch b.Type {
		case transcript.BlockText:
			if b.Text != "" {
				blocks = append(blocks, newText(b.Text))
			}
		case transcript.BlockThinking:
			switch {
			case b.Redacted && own:
				blocks = append(blocks, redactedThinkingParam{Type: "redacted_thinking", Data: b.Thinking})
			case b.Redacted:
			case b.ThinkingSignature != "" && own:
				blocks = append(blocks, thinkingParam{Type: "thinking", Thinking: b.Thinking, Signature: b.ThinkingSignature})
			case b.Thinking != "":
				blocks = append(blocks, newText(b.Thinking))
			}
		case transcript.BlockToolCall:
			args := b.Arguments
			if args == nil {
				args = json.RawMessage("{}")
			}
			if !isObject(args) {
				return nil, nil, fmt.Errorf("tool call %q: arguments are not a JSON object", b.ID)
			}
			blocks = append(blocks, toolUseParam{Type: "tool_use", ID: b.ID, Name: b.Name, Input: args})
			calls = append(calls, b)
		default:
			return nil, nil, fmt.Errorf("an assistant message cannot hold a block of type %q", b.Type)
		}
	}
	return blocks, calls, nil
}

func toolResult(m transcript.Message) (any, error) {
	r := toolResultParam{Type: "tool_result", ToolUseID: m.ToolCallID, IsError: m.ToolError}
	for _, b := range m.Content {
		switch b.Type {
		case transcript.BlockText:
			if b.Text != "" {
				r.Content = append(r.Content, newText(b.Text))
			}
		case transcript.BlockImage:
			r.Content = append(r.Content, newImage(b.MimeType, b.Data))
		default:
			return nil, fmt.Errorf("a tool result cannot hold a block of type %q", b.Type)
		}
	}
	return r, nil
}

// toolParams are the registered tools as the API takes them.
func (a *Agent) toolParams() ([]toolParam, error) {
	var out []toolParam
	seen := map[string]bool{}
	for _, t := range a.opts.Tools {
		if t.Name == "" {
			return nil, fmt.Errorf("anthropic: a tool has no name")
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("anthropic: two tools are named %q", t.Name)
		}
		seen[t.Name] = true
		// The schema is an object schema: its type is "object" whatever
		// it said, its properties {} when it has none.
		schema := map[string]any{"type": "object", "properties": map[string]any{}}
		if len(t.Schema) > 0 {
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(t.Schema, &fields); err != nil || fields == nil {
				return nil, fmt.Errorf("anthropic: tool %q: the schema is not a JSON object", t.Name)
			}
			for k, v := range fields {
				switch k {
				case "type":
				case "required":
					var names []string
					if err := json.Unmarshal(v, &names); err != nil {
						return nil, fmt.Errorf("anthropic: tool %q: the schema's required is not a list of names", t.Name)
					}
					schema[k] = names
				default:
					schema[k] = v
				}
			}
		}
		out = append(out, toolParam{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out, nil
}
