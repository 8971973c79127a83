package policy

import (
	"encoding/json"

	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// Event is something that happened in a session. Each event is a plain Go
// value; its JSON form is an object with a "type" (docs/policy.md §6), optional
// fields left out when absent.
type Event interface {
	// Type returns the event's wire type, such as "auto_retry_start".
	Type() string
}

// The agent's own events, reported by an Agent as a run happens.
type (
	// AgentStart: a run began.
	AgentStart struct{}
	// TurnStart: one model call (and the tools it asks for) began.
	TurnStart struct{}
	// MessageStart: a message began.
	MessageStart struct {
		Message Message `json:"message"`
	}
	// MessageEnd: a message is complete. The session appends it to the
	// runtime context and to history.
	MessageEnd struct {
		Message Message `json:"message"`
	}
	// TurnEnd: a turn ended.
	TurnEnd struct{}
	// AgentEnd: the run ended; Messages are the messages it made.
	AgentEnd struct {
		Messages []Message `json:"messages"`
	}
)

// The session's recovery events.
type (
	// AutoRetryStart: a retry is scheduled after DelayMs.
	AutoRetryStart struct {
		Attempt      int    `json:"attempt"`
		MaxAttempts  int    `json:"maxAttempts"`
		DelayMs      int64  `json:"delayMs"`
		ErrorMessage string `json:"errorMessage"`
	}
	// AutoRetryEnd: a retry chain ended; exactly one per chain.
	AutoRetryEnd struct {
		Success    bool   `json:"success"`
		Attempt    int    `json:"attempt"`
		FinalError string `json:"finalError,omitempty"`
	}
	// AutoCompactionStart: an automatic compaction began.
	AutoCompactionStart struct {
		Reason CompactionReason `json:"reason"`
	}
	// AutoCompactionEnd: an automatic compaction ended; exactly one per
	// start. Result is set only when it succeeded.
	AutoCompactionEnd struct {
		Result       *CompactionResult `json:"result,omitempty"`
		Aborted      bool              `json:"aborted"`
		WillRetry    bool              `json:"willRetry"`
		ErrorMessage string            `json:"errorMessage,omitempty"`
	}
	// StateChange: the recovery machine took a transition.
	StateChange struct {
		From  states.State      `json:"from"`
		To    states.State      `json:"to"`
		Event transitions.Event `json:"event"`
	}
	// TurnSettled: the turn a Prompt started has settled: the run, its
	// retries and any overflow recovery. It is the last event of a turn,
	// emitted just before Prompt returns; Error is why the turn failed.
	TurnSettled struct {
		Success bool   `json:"success"`
		Error   string `json:"error,omitempty"`
	}
	// EventsDropped: a subscriber with a bounded buffer fell behind and
	// Count events were not delivered to it. Only that subscriber sees it.
	EventsDropped struct {
		Count int `json:"count"`
	}
)

func (AgentStart) Type() string          { return "agent_start" }
func (TurnStart) Type() string           { return "turn_start" }
func (MessageStart) Type() string        { return "message_start" }
func (MessageEnd) Type() string          { return "message_end" }
func (TurnEnd) Type() string             { return "turn_end" }
func (AgentEnd) Type() string            { return "agent_end" }
func (AutoRetryStart) Type() string      { return "auto_retry_start" }
func (AutoRetryEnd) Type() string        { return "auto_retry_end" }
func (AutoCompactionStart) Type() string { return "auto_compaction_start" }
func (AutoCompactionEnd) Type() string   { return "auto_compaction_end" }
func (StateChange) Type() string         { return "state_change" }
func (EventsDropped) Type() string       { return "events_dropped" }
func (TurnSettled) Type() string         { return "turn_settled" }

// withType marshals v (a struct without a MarshalJSON method of its own)
// and puts "type" first.
func withType(typ string, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	head := `{"type":` + string(mustQuote(typ))
	if string(body) == "{}" {
		return []byte(head + "}"), nil
	}
	return append([]byte(head+","), body[1:]...), nil
}

func mustQuote(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// The MarshalJSON methods give each event its wire form. Each converts to a
// local type without methods, so the struct's own tags apply.

func (e AgentStart) MarshalJSON() ([]byte, error) { return withType(e.Type(), struct{}{}) }
func (e TurnStart) MarshalJSON() ([]byte, error)  { return withType(e.Type(), struct{}{}) }
func (e TurnEnd) MarshalJSON() ([]byte, error)    { return withType(e.Type(), struct{}{}) }
func (e MessageStart) MarshalJSON() ([]byte, error) {
	type plain MessageStart
	return withType(e.Type(), plain(e))
}
func (e MessageEnd) MarshalJSON() ([]byte, error) {
	type plain MessageEnd
	return withType(e.Type(), plain(e))
}
func (e AgentEnd) MarshalJSON() ([]byte, error) {
	type plain AgentEnd
	if e.Messages == nil {
		e.Messages = []Message{}
	}
	return withType(e.Type(), plain(e))
}
func (e AutoRetryStart) MarshalJSON() ([]byte, error) {
	type plain AutoRetryStart
	return withType(e.Type(), plain(e))
}
func (e AutoRetryEnd) MarshalJSON() ([]byte, error) {
	type plain AutoRetryEnd
	return withType(e.Type(), plain(e))
}
func (e AutoCompactionStart) MarshalJSON() ([]byte, error) {
	type plain AutoCompactionStart
	return withType(e.Type(), plain(e))
}
func (e AutoCompactionEnd) MarshalJSON() ([]byte, error) {
	type plain AutoCompactionEnd
	return withType(e.Type(), plain(e))
}
func (e StateChange) MarshalJSON() ([]byte, error) {
	type plain StateChange
	return withType(e.Type(), plain(e))
}
func (e EventsDropped) MarshalJSON() ([]byte, error) {
	type plain EventsDropped
	return withType(e.Type(), plain(e))
}
func (e TurnSettled) MarshalJSON() ([]byte, error) {
	type plain TurnSettled
	return withType(e.Type(), plain(e))
}
