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

// Usage is the token usage a model call reports.
type Usage = classify.Usage

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
// history already has (a tool result's ToolCallID follows): the ID in the
// MessageEnd event is the one the session keeps.
type Message struct {
	ID   string `json:"id"`
	Role Role   `json:"role"`
	// Text is the message's text content.
	Text string `json:"text,omitempty"`
	// Images is the number of images the message carries.
	Images int `json:"images,omitempty"`
	// ToolCallID ties a tool result to the assistant message that asked for
	// it (that message's ID).
	ToolCallID string `json:"toolCallId,omitempty"`

	// The fields below are an assistant message's.
	StopReason   classify.StopReason `json:"stopReason,omitempty"`
	ErrorMessage string              `json:"errorMessage,omitempty"`
	Usage        *Usage              `json:"usage,omitempty"`
	Provider     string              `json:"provider,omitempty"`
	Model        string              `json:"model,omitempty"`
	// Timestamp is when the message was made, in milliseconds since the
	// Unix epoch.
	Timestamp int64 `json:"timestamp"`

	// Typed facts about a failed call, when the agent knows them; the
	// classifier weighs them before the text (see package classify).
	HTTPStatus int               `json:"httpStatus,omitempty"`
	ErrorType  string            `json:"errorType,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Err        error             `json:"-"`
}

// IsError reports whether m is an assistant message that ended in an error.
func (m Message) IsError() bool {
	return m.Role == RoleAssistant && m.StopReason == classify.StopReasonError
}

// succeeded reports whether m is an assistant message whose stop reason is
// neither error nor aborted: the message that ends a retry chain.
func (m Message) succeeded() bool {
	return m.Role == RoleAssistant && m.StopReason != classify.StopReasonError && m.StopReason != classify.StopReasonAborted
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
// their maps are shared and must not be changed).
func cloneMessages(ms []Message) []Message {
	return append([]Message(nil), ms...)
}
