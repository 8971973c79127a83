package policy

import (
	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transcript"
)

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

// classifyMessage is m as the classifier reads it.
func classifyMessage(m transcript.Message, window int) classify.Message {
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
func cloneMessages(ms []transcript.Message) []transcript.Message {
	return append([]transcript.Message(nil), ms...)
}
