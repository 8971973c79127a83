package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentfsm/agentfsm/internal/wiretext"
)

// BlockType says what a content block holds.
type BlockType string

// The block types, named as on the reference agent's wire.
const (
	// BlockText: text, with the provider's signature when it gave one.
	BlockText BlockType = "text"
	// BlockImage: an image, base64-encoded, with its MIME type.
	BlockImage BlockType = "image"
	// BlockThinking: the model's reasoning, with its signature; redacted
	// thinking holds the provider's opaque data in Thinking.
	BlockThinking BlockType = "thinking"
	// BlockToolCall: a call of a tool, with its arguments.
	BlockToolCall BlockType = "toolCall"
)

// Block is one block of a message's content. Type says which of its
// fields count; the others stay empty. As JSON it takes the reference's
// shapes exactly:
//
//	{"type":"text","text":"…","textSignature":"…"}      (textSignature when set)
//	{"type":"image","data":"<base64>","mimeType":"image/png"}
//	{"type":"thinking","thinking":"…","thinkingSignature":"…","redacted":true}
//	                                                      (the last two when set)
//	{"type":"toolCall","id":"…","name":"…","arguments":{…}}
//
// A block of another type is an error to decode.
//
// Its JSON is valid UTF-8, whatever its fields hold: a string's bytes
// that are not UTF-8 are written as U+FFFD (as encoding/json writes any
// string), and so are the arguments' (see Arguments); reading gives the
// same. A session holds its agent's blocks to this rule as it takes them
// (docs/session.md), so what it keeps is what it writes.
type Block struct {
	Type BlockType

	// Text and TextSignature are a text block's.
	Text          string
	TextSignature string

	// Data (base64) and MimeType are an image's.
	Data     string
	MimeType string

	// Thinking, ThinkingSignature and Redacted are a thinking block's.
	Thinking          string
	ThinkingSignature string
	Redacted          bool

	// ID, Name and Arguments are a tool call's. Arguments is a JSON
	// object, kept as its bytes: written as they are (nil is written as
	// {}) and read back compacted, with key order, number spellings and
	// string escapes untouched, but for the text rule of every line the
	// library writes: inside its strings, a byte that is not UTF-8 and
	// the escape of a lone surrogate (\ud800 without its pair) are
	// written as \ufffd, and U+2028 and U+2029 as \u2028 and \u2029
	// (what encoding/json does to a string; the value read is the same).
	// The session's own encoders (history, RPC)
	// write them exactly; json.Marshal escapes <, > and & in them as
	// \u003c, \u003e and \u0026 (the same JSON, other bytes), so to keep
	// the bytes use a json.Encoder with SetEscapeHTML(false).
	ID        string
	Name      string
	Arguments json.RawMessage
}

// TextBlock is a text block holding s.
func TextBlock(s string) Block { return Block{Type: BlockText, Text: s} }

// TextContent is content of one text block holding s.
func TextContent(s string) []Block { return []Block{TextBlock(s)} }

type textJSON struct {
	Type          BlockType `json:"type"`
	Text          string    `json:"text"`
	TextSignature string    `json:"textSignature,omitempty"`
}

type imageJSON struct {
	Type     BlockType `json:"type"`
	Data     string    `json:"data"`
	MimeType string    `json:"mimeType"`
}

type thinkingJSON struct {
	Type              BlockType `json:"type"`
	Thinking          string    `json:"thinking"`
	ThinkingSignature string    `json:"thinkingSignature,omitempty"`
	Redacted          bool      `json:"redacted,omitempty"`
}

type toolCallJSON struct {
	Type      BlockType       `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// MarshalJSON writes b in its type's shape.
func (b Block) MarshalJSON() ([]byte, error) {
	switch b.Type {
	case BlockText:
		return marshalJSON(textJSON{b.Type, b.Text, b.TextSignature})
	case BlockImage:
		return marshalJSON(imageJSON{b.Type, b.Data, b.MimeType})
	case BlockThinking:
		return marshalJSON(thinkingJSON{b.Type, b.Thinking, b.ThinkingSignature, b.Redacted})
	case BlockToolCall:
		args := b.Arguments
		if args == nil {
			args = json.RawMessage("{}")
		}
		if !isObject(args) {
			return nil, fmt.Errorf("transcript: tool call %q: arguments are not a JSON object", b.ID)
		}
		return marshalJSON(toolCallJSON{b.Type, b.ID, b.Name, wiretext.JSON(args)})
	}
	return nil, fmt.Errorf("transcript: unknown content block type %q", b.Type)
}

// UnmarshalJSON reads a block in one of the shapes MarshalJSON writes.
func (b *Block) UnmarshalJSON(data []byte) error {
	var head struct {
		Type BlockType `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return decodeErr("content block", err)
	}
	what := string(head.Type) + " block"
	switch head.Type {
	case BlockText:
		var v textJSON
		if err := json.Unmarshal(data, &v); err != nil {
			return decodeErr(what, err)
		}
		*b = Block{Type: v.Type, Text: v.Text, TextSignature: v.TextSignature}
	case BlockImage:
		var v imageJSON
		if err := json.Unmarshal(data, &v); err != nil {
			return decodeErr(what, err)
		}
		*b = Block{Type: v.Type, Data: v.Data, MimeType: v.MimeType}
	case BlockThinking:
		var v thinkingJSON
		if err := json.Unmarshal(data, &v); err != nil {
			return decodeErr(what, err)
		}
		*b = Block{Type: v.Type, Thinking: v.Thinking, ThinkingSignature: v.ThinkingSignature, Redacted: v.Redacted}
	case BlockToolCall:
		var v toolCallJSON
		if err := json.Unmarshal(data, &v); err != nil {
			return decodeErr(what, err)
		}
		if !isObject(v.Arguments) {
			return fmt.Errorf("transcript: tool call %q: arguments are not a JSON object", v.ID)
		}
		var args bytes.Buffer
		if err := json.Compact(&args, v.Arguments); err != nil {
			return decodeErr(what, err)
		}
		*b = Block{Type: v.Type, ID: v.ID, Name: v.Name, Arguments: wiretext.JSON(args.Bytes())}
	default:
		return fmt.Errorf("transcript: unknown content block type %q", head.Type)
	}
	return nil
}

// Canonical returns m with its Content and StringContent as a message
// written and read back has them: content that cannot be a string (more
// than one block, or one that is not an unsigned text block) is not string
// content, and string content that is one empty text block is none.
func (m Message) Canonical() Message {
	m.Content, m.StringContent = stringContent(m)
	return m
}

// stringContent is m's content and StringContent as Canonical has them.
func stringContent(m Message) ([]Block, bool) {
	if !m.StringContent || len(m.Content) == 0 {
		return m.Content, m.StringContent
	}
	if b := m.Content[0]; len(m.Content) > 1 || b.Type != BlockText || b.TextSignature != "" {
		return m.Content, false
	}
	if m.Content[0].Text == "" {
		return nil, true
	}
	return m.Content, true
}

// CheckContent checks that every block of m has a known type and every
// tool call's arguments are a JSON object (or nil), so that m can be
// written; the error says which block is not.
func (m Message) CheckContent() error {
	if err := m.checkContent(); err != nil {
		return fmt.Errorf("transcript: %w", err)
	}
	return nil
}

// checkContent is CheckContent's check, its error without the package's
// name (for errors that already carry it).
func (m Message) checkContent() error {
	for i, b := range m.Content {
		switch b.Type {
		case BlockText, BlockImage, BlockThinking:
		case BlockToolCall:
			if b.Arguments != nil && !isObject(b.Arguments) {
				return fmt.Errorf("block %d: tool call %q: arguments are not a JSON object", i, b.ID)
			}
		default:
			return fmt.Errorf("block %d: unknown content block type %q", i, b.Type)
		}
	}
	return nil
}

// isObject reports whether raw is a valid JSON object.
func isObject(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(raw)
}

// marshalJSON is json.Marshal without HTML escaping, so that the bytes of
// tool call arguments are written as they are.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Text is the message's text: its text blocks, concatenated.
func (m Message) Text() string {
	var sb strings.Builder
	for _, b := range m.Content {
		if b.Type == BlockText {
			sb.WriteString(b.Text)
		}
	}
	return sb.String()
}

// ToolCalls are the message's tool call blocks.
func (m Message) ToolCalls() []Block {
	var calls []Block
	for _, b := range m.Content {
		if b.Type == BlockToolCall {
			calls = append(calls, b)
		}
	}
	return calls
}

// messageJSON is a message on the wire. Text and Images are read only:
// the fields of a message in a history written before content blocks.
type messageJSON struct {
	ID           string            `json:"id"`
	Role         Role              `json:"role"`
	Content      json.RawMessage   `json:"content,omitempty"`
	ToolCallID   string            `json:"toolCallId,omitempty"`
	ToolName     string            `json:"toolName,omitempty"`
	IsError      *bool             `json:"isError,omitempty"`
	StopReason   StopReason        `json:"stopReason,omitempty"`
	ErrorMessage string            `json:"errorMessage,omitempty"`
	Usage        *Usage            `json:"usage,omitempty"`
	Provider     string            `json:"provider,omitempty"`
	Model        string            `json:"model,omitempty"`
	Timestamp    int64             `json:"timestamp"`
	HTTPStatus   int               `json:"httpStatus,omitempty"`
	ErrorType    string            `json:"errorType,omitempty"`
	Headers      map[string]string `json:"headers,omitempty"`
	Text         *string           `json:"text,omitempty"`
	Images       int               `json:"images,omitempty"`
}

// MarshalJSON writes m in the reference's shape: its content as blocks, or
// as a string when StringContent says so and the content is at most one
// text block without a signature; a tool result's isError always. Its text
// is valid UTF-8 (see Block); two header names that differ only in bytes
// that are not UTF-8 are written once, with the value of the later name in
// byte order.
func (m Message) MarshalJSON() ([]byte, error) {
	var content any = m.Content
	switch {
	case m.StringContent && len(m.Content) == 0:
		content = ""
	case m.StringContent && len(m.Content) == 1 && m.Content[0].Type == BlockText && m.Content[0].TextSignature == "":
		content = m.Content[0].Text
	case m.Content == nil:
		content = []Block{}
	}
	raw, err := marshalJSON(content)
	if err != nil {
		return nil, fmt.Errorf("transcript: message %q: %w", m.ID, err)
	}
	w := messageJSON{
		ID: m.ID, Role: m.Role, Content: raw, ToolCallID: m.ToolCallID, ToolName: m.ToolName,
		StopReason: m.StopReason, ErrorMessage: m.ErrorMessage, Usage: m.Usage, Provider: m.Provider, Model: m.Model,
		Timestamp: m.Timestamp, HTTPStatus: m.HTTPStatus, ErrorType: m.ErrorType, Headers: validHeaders(m.Headers, &cleaner{}),
	}
	if m.Role == RoleToolResult || m.ToolError {
		w.IsError = &m.ToolError
	}
	return marshalJSON(w)
}

// UnmarshalJSON reads a message in the shape MarshalJSON writes, or in the
// shape of a history written before content blocks (a "text" string and
// an "images" count instead of "content"): its text becomes a text block
// (a user's without images, string content) and each image an image block
// without data.
func (m *Message) UnmarshalJSON(data []byte) error {
	var w messageJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return decodeErr("message", err)
	}
	*m = Message{
		ID: w.ID, Role: w.Role, ToolCallID: w.ToolCallID, ToolName: w.ToolName, ToolError: w.IsError != nil && *w.IsError,
		StopReason: w.StopReason, ErrorMessage: w.ErrorMessage, Usage: w.Usage, Provider: w.Provider, Model: w.Model,
		Timestamp: w.Timestamp, HTTPStatus: w.HTTPStatus, ErrorType: w.ErrorType, Headers: w.Headers,
	}
	switch {
	case len(w.Content) > 0 && w.Content[0] == '"':
		var s string
		if err := json.Unmarshal(w.Content, &s); err != nil {
			return decodeErr(fmt.Sprintf("message %q: content", w.ID), err)
		}
		m.StringContent = true
		if s != "" {
			m.Content = TextContent(s)
		}
	case w.Content != nil && string(w.Content) != "null":
		var blocks []Block
		if err := json.Unmarshal(w.Content, &blocks); err != nil {
			return contentError(w.ID, w.Content, err)
		}
		if len(blocks) > 0 {
			m.Content = blocks
		}
	default:
		m.legacyContent(w.Text, w.Images)
	}
	return nil
}

// contentError is the error of a message's content that did not decode
// (err): it names the block at fault by its index, found by reading the
// blocks again one by one (only on this path, so that a message that
// decodes pays for no second pass).
func contentError(id string, content json.RawMessage, err error) error {
	var raws []json.RawMessage
	if json.Unmarshal(content, &raws) == nil {
		for i, raw := range raws {
			var b Block
			if berr := b.UnmarshalJSON(raw); berr != nil {
				return decodeErr(fmt.Sprintf("message %q: content: block %d", id, i), berr)
			}
		}
	}
	return decodeErr(fmt.Sprintf("message %q: content", id), err)
}

// legacyContent sets the content of a message written before content
// blocks from its text and image count.
func (m *Message) legacyContent(text *string, images int) {
	if images < 0 || images > maxLegacyImages {
		images = 0
	}
	if m.Role == RoleUser && images == 0 {
		m.StringContent = true
	}
	if text != nil && *text != "" {
		m.Content = append(m.Content, TextBlock(*text))
	}
	for range images {
		m.Content = append(m.Content, Block{Type: BlockImage})
	}
}

// maxLegacyImages bounds the images an old message's count turns into, so
// that a garbage count cannot exhaust memory.
const maxLegacyImages = 1000
