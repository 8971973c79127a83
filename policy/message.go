package policy

import (
	"github.com/agentfsm/agentfsm/classify"
)

// Role says who wrote a message.
type Role string

// The roles.
const (
	RoleUser       Role = "user"
	RoleAssistant  Role = "assistant"
	RoleToolResult Role = "toolResult"
)

// Usage is the token usage a model call reports, with its cost when known.
type Usage = classify.Usage

// Cost is what a model call cost, by part.
type Cost = classify.Cost

// Model names the model a session talks to.
type Model struct {
	Provider string `json:"provider"`
	ID       string `json:"id"`
	// ContextWindow is the model's context window in tokens; 0 when unknown
	// (then the threshold compaction never runs).
	ContextWindow int `json:"contextWindow"`
	// BaseURL is the provider endpoint, when it matters to the credential
	// store.
	BaseURL string `json:"baseUrl,omitempty"`
}

// Message is one entry of a conversation: a user prompt, an assistant
// message (the result of one model call), or a tool result.
//
// ID is the message's identity: the session removes and finds messages by
// it, never by position or role. An agent should set it; the session fills
// an empty ID when the message ends, and replaces one that an entry of the
// history already has: the ID in the MessageEnd event is the one the
// session keeps. As JSON (history, RPC) a message takes the reference
// agent's wire shape; see MarshalJSON.
type Message struct {
	ID   string
	Role Role
	// Content is the message's content blocks, kept byte for byte through
	// retries, compaction, history and snapshots, once the engine has
	// taken them under its text rule (valid UTF-8; see Block). A user message holds
	// text and images; an assistant message text, thinking and tool
	// calls; a tool result text and images.
	Content []Block
	// StringContent says the content is written as a plain JSON string,
	// as a user message's may be: Content is then one text block (or
	// none, for ""). Content of any other form is written as blocks.
	StringContent bool

	// ToolCallID, ToolName and ToolError are a tool result's: the ID of
	// the tool call block it answers, the tool's name, and whether the
	// tool failed (isError).
	ToolCallID string
	ToolName   string
	ToolError  bool

	// The fields below are an assistant message's.
	StopReason   classify.StopReason
	ErrorMessage string
	Usage        *Usage
	Provider     string
	Model        string
	// Timestamp is when the message was made, in milliseconds since the
	// Unix epoch.
	Timestamp int64

	// Typed facts about a failed call, when the agent knows them; the
	// classifier weighs them before the text (see package classify).
	HTTPStatus int
	ErrorType  string
	Headers    map[string]string
	// Err is never written.
	Err error
}

// IsError reports whether m is an assistant message that ended in an error.
func (m Message) IsError() bool {
	return m.Role == RoleAssistant && m.StopReason == classify.StopReasonError
}

// classifyMessage is m as the classifier reads it.
func (m Message) classifyMessage(window int) classify.Message {
	cm := classify.Message{
		StopReason:    m.StopReason,
		ErrorMessage:  m.ErrorMessage,
		Status:        m.HTTPStatus,
		ErrorType:     m.ErrorType,
		Headers:       m.Headers,
		Err:           m.Err,
		ContextWindow: window,
	}
	if m.Usage != nil {
		cm.Usage = *m.Usage
	}
	return cm
}

// cloneMessages copies a message list (the messages themselves are values;
// their maps and content are shared and must not be changed).
func cloneMessages(ms []Message) []Message {
	return append([]Message(nil), ms...)
}
