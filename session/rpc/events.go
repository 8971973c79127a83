package rpc

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

// EventType returns the wire type of ev, the "type" of its line, such as
// "auto_retry_start" for a events.AutoRetryStart; "" for nil.
func EventType(ev events.Event) string {
	switch ev.(type) {
	case events.AgentStart:
		return "agent_start"
	case events.CallStart:
		return "turn_start"
	case events.MessageStart:
		return "message_start"
	case events.MessageUpdate:
		return "message_update"
	case events.MessageEnd:
		return "message_end"
	case events.CallEnd:
		return "turn_end"
	case events.AgentEnd:
		return "agent_end"
	case events.AutoRetryStart:
		return "auto_retry_start"
	case events.AutoRetryEnd:
		return "auto_retry_end"
	case events.AutoCompactionStart:
		return "auto_compaction_start"
	case events.AutoCompactionEnd:
		return "auto_compaction_end"
	case events.StateChange:
		return "state_change"
	case events.TurnSettled:
		return "turn_settled"
	case events.EventsDropped:
		return "events_dropped"
	case events.ModelFallback:
		return "model_fallback"
	case events.ModelRevert:
		return "model_revert"
	case events.SharedLimitWait:
		return "shared_limit_wait"
	}
	return ""
}

// The events' wire forms (docs/rpc.md). Each but auto_retry_start's,
// auto_retry_end's, auto_compaction_end's, model_fallback's and turn_settled's has the fields of its session event, in the same order,
// so that a conversion turns one into the other; "type" is added in front.
type (
	messageEvent struct {
		Message transcript.Message `json:"message"`
	}
	agentEnd struct {
		Messages []transcript.Message `json:"messages"`
	}
	messageUpdate struct {
		Message transcript.Message `json:"message"`
		Delta   delta              `json:"delta"`
	}
	delta struct {
		Kind  string `json:"kind"`
		Index int    `json:"contentIndex"`
		Text  string `json:"delta"`
	}
	autoRetryStart struct {
		Attempt      int       `json:"attempt"`
		MaxAttempts  int       `json:"maxAttempts"`
		DelayMs      int64     `json:"delayMs"`
		ErrorMessage string    `json:"errorMessage"`
		ErrorClass   wireClass `json:"errorClass,omitempty"`
		Provider     string    `json:"provider,omitempty"`
		Model        string    `json:"model,omitempty"`
		Credential   string    `json:"credentialId,omitempty"`
		// The time budget's figures, written only when the chain has one
		// (maxElapsedMs above 0): a chain without one, the reference's,
		// keeps its line byte for byte.
		ElapsedMs    *int64 `json:"elapsedMs,omitempty"`
		MaxElapsedMs int64  `json:"maxElapsedMs,omitempty"`
		RemainingMs  *int64 `json:"remainingMs,omitempty"`
		// ResetAt (RFC 3339, in UTC, to the millisecond) and ResetAtMs
		// (Unix milliseconds) say when the usage limit a wait for a reset
		// waits out resets; absent for a retry on the chain's own delays.
		ResetAt   string `json:"resetAt,omitempty"`
		ResetAtMs int64  `json:"resetAtMs,omitempty"`
	}
	autoRetryEnd struct {
		Success    bool                `json:"success"`
		Attempt    int                 `json:"attempt"`
		FinalError string              `json:"finalError,omitempty"`
		Outcome    events.RetryOutcome `json:"outcome,omitempty"`
		ErrorClass wireClass           `json:"errorClass,omitempty"`
		Limit      events.RetryLimit   `json:"limit,omitempty"`
		ResetWait  bool                `json:"resetWait,omitempty"`
	}
	autoCompactionStart struct {
		Reason transcript.CompactionReason `json:"reason"`
	}
	autoCompactionEnd struct {
		Result       *compactionResult `json:"result,omitempty"`
		Aborted      bool              `json:"aborted"`
		WillRetry    bool              `json:"willRetry"`
		ErrorMessage string            `json:"errorMessage,omitempty"`
	}
	stateChange struct {
		From    states.State        `json:"from"`
		To      states.State        `json:"to"`
		Trigger transitions.Trigger `json:"event"`
	}
	turnSettled struct {
		Success    bool      `json:"success"`
		Error      string    `json:"error,omitempty"`
		Code       string    `json:"code,omitempty"`
		ErrorClass wireClass `json:"errorClass,omitempty"`
	}
	eventsDropped struct {
		Count int `json:"count"`
	}
	// modelFallback's until is RFC 3339 in UTC to the millisecond, and
	// untilMs the same in Unix milliseconds.
	modelFallback struct {
		From    string                `json:"from"`
		To      string                `json:"to"`
		Reason  events.FallbackReason `json:"reason"`
		Until   string                `json:"until"`
		UntilMs int64                 `json:"untilMs"`
	}
	modelRevert struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	// sharedLimitWait carries Until as RFC 3339 (in UTC, to the
	// millisecond) and as Unix milliseconds, as auto_retry_start carries
	// resetAt.
	sharedLimitWait struct {
		Key     string `json:"key"`
		Until   string `json:"until"`
		UntilMs int64  `json:"untilMs"`
		Reason  string `json:"reason"`
	}
)

// sessionErrors are the policy's errors whose text begins "policy:" in Go
// and "session:" on the wire, as it did when the wire was fixed: a
// response's error has no code, so a client tells a busy session or a
// refused compaction by its text, and reads every error of the stream as
// the session's, which is what it speaks to.
var sessionErrors = []error{
	policy.ErrBusy, policy.ErrClosed, policy.ErrRetryCancelled, policy.ErrAborted, policy.ErrExhausted,
	policy.ErrProvider, policy.ErrOverflow, policy.ErrHistory, policy.ErrStartFailed,
	policy.ErrNothingToCompact, policy.ErrAlreadyCompacted, policy.ErrCompactionCancelled,
}

// The leads of a failed compaction's errorMessage, which the policy writes
// before the error's text.
var compactionLeads = []string{"Auto-compaction failed: ", "Context overflow recovery failed: "}

// wireText is text as the wire carries it: when it begins (or a failed
// compaction's errorMessage goes on, after its lead) with the text of one
// of sessionErrors, that text's "policy:" is "session:", and so is that of
// a policy error it wraps (an overflow's compaction error, say). What
// follows a provider error is the provider's text and goes as it is, as
// does anything else.
func wireText(text string) string {
	for _, l := range compactionLeads {
		if strings.HasPrefix(text, l) {
			return l + sessionText(text[len(l):])
		}
	}
	return sessionText(text)
}

// sessionText maps the policy error text that body begins with, and those
// it wraps, to their wire text, in one pass over body.
func sessionText(body string) string {
	var b strings.Builder
	for {
		rest, e, ok := policyPrefix(body)
		if !ok {
			if b.Len() == 0 {
				return body
			}
			b.WriteString(body)
			return b.String()
		}
		b.WriteString("session: ")
		b.WriteString(strings.TrimPrefix(e.Error(), "policy: "))
		// After an exhausted chain (" after 3 attempts: …") or a provider
		// error comes the provider's text, as it is; after any other, the
		// error it wraps, which may be the policy's too.
		if rest == "" || !strings.HasPrefix(rest, ": ") || e == policy.ErrProvider {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(": ")
		body = rest[2:]
	}
}

// policyPrefix reports what follows the text of the error of sessionErrors
// that body begins with, whole or followed by ": " or " ", and that error.
func policyPrefix(body string) (rest string, sentinel error, ok bool) {
	for _, e := range sessionErrors {
		msg := e.Error()
		if !strings.HasPrefix(msg, "policy: ") {
			continue
		}
		after, found := strings.CutPrefix(body, msg)
		if found && (after == "" || after[0] == ':' || after[0] == ' ') {
			return after, e, true
		}
	}
	return body, nil, false
}

// renamedTriggers maps a rule's name as servers of an earlier version wrote
// it in a state_change line to its name now, so that a line logged then
// still decodes to the rule it stood for.
var renamedTriggers = map[transitions.Trigger]transitions.Trigger{
	"settle": transitions.Accept,
}

// wireClass is a classify.Class on the wire: its name, omitted for None. A
// name this client does not know reads as None, so a newer server's class
// does not make the event unreadable.
type wireClass classify.Class

func (c wireClass) MarshalText() ([]byte, error) { return classify.Class(c).MarshalText() }

func (c *wireClass) UnmarshalText(b []byte) error {
	parsed, err := classify.ParseClass(string(b))
	if err != nil {
		parsed = classify.None
	}
	*c = wireClass(parsed)
	return nil
}

// compactionResult is a transcript.Compaction on the wire, in
// auto_compaction_end and in the compact command's response: the reference
// protocol's compaction result, which has no reason, and after its fields
// ours: tokensAfter, and truncated (the tool results it kept truncated,
// left out when none).
type compactionResult struct {
	Summary          string                  `json:"summary"`
	FirstKeptEntryID string                  `json:"firstKeptEntryId"`
	TokensBefore     int                     `json:"tokensBefore"`
	Details          any                     `json:"details,omitempty"`
	TokensAfter      int                     `json:"tokensAfter,omitempty"`
	Truncated        []transcript.Truncation `json:"truncated,omitempty"`
}

// wireCompaction is c on the wire: without its reason.
func wireCompaction(c transcript.Compaction) compactionResult {
	return compactionResult{Summary: c.Summary, FirstKeptEntryID: c.FirstKeptEntryID, TokensBefore: c.TokensBefore, Details: c.Details, TokensAfter: c.TokensAfter,
		Truncated: c.Truncated}
}

// compaction returns the session's compaction, for reason.
func (w compactionResult) compaction(reason transcript.CompactionReason) transcript.Compaction {
	return transcript.Compaction{Reason: reason, Summary: w.Summary, FirstKeptEntryID: w.FirstKeptEntryID, TokensBefore: w.TokensBefore,
		TokensAfter: w.TokensAfter, Details: w.Details, Truncated: w.Truncated}
}

// MarshalEvent returns ev's line as the server writes it, without its
// newline: a JSON object whose "type" comes first (EventType), then the
// event's fields in their wire form (docs/rpc.md). A program that logs a
// session's events as JSON lines writes them with it, so the lines read as
// the server's. It fails for a value that is not one of the session's
// events.
func MarshalEvent(ev events.Event) ([]byte, error) { return marshalEvent(ev) }

// marshalEvent returns ev's line, without its newline: a JSON object whose
// "type" comes first.
func marshalEvent(ev events.Event) ([]byte, error) {
	var body any
	switch e := ev.(type) {
	case events.AgentStart, events.CallStart, events.CallEnd:
		body = struct{}{}
	case events.MessageStart:
		body = messageEvent(e)
	case events.MessageUpdate:
		body = messageUpdate{Message: e.Message, Delta: delta(e.Delta)}
	case events.MessageEnd:
		body = messageEvent(e)
	case events.AgentEnd:
		if e.Messages == nil {
			e.Messages = []transcript.Message{}
		}
		body = agentEnd(e)
	case events.AutoRetryStart:
		w := autoRetryStart{Attempt: e.Attempt, MaxAttempts: e.MaxAttempts, DelayMs: e.DelayMs, ErrorMessage: e.ErrorMessage,
			ErrorClass: wireClass(e.ErrorClass), Provider: e.Provider, Model: e.Model, Credential: e.Credential}
		if e.MaxElapsedMs > 0 {
			elapsed, remaining := e.ElapsedMs, e.RemainingMs
			w.ElapsedMs, w.MaxElapsedMs, w.RemainingMs = &elapsed, e.MaxElapsedMs, &remaining
		}
		w.ResetAt, w.ResetAtMs = wireTime(e.ResetAt)
		body = w
	case events.AutoRetryEnd:
		body = autoRetryEnd{Success: e.Success, Attempt: e.Attempt, FinalError: e.FinalError, Outcome: e.Outcome, ErrorClass: wireClass(e.ErrorClass),
			Limit: e.Limit, ResetWait: e.ResetWait}
	case events.AutoCompactionStart:
		body = autoCompactionStart(e)
	case events.AutoCompactionEnd:
		w := autoCompactionEnd{Aborted: e.Aborted, WillRetry: e.WillRetry, ErrorMessage: wireText(e.ErrorMessage)}
		if e.Result != nil {
			res := wireCompaction(*e.Result)
			w.Result = &res
		}
		body = w
	case events.StateChange:
		body = stateChange(e)
	case events.TurnSettled:
		w := turnSettled{Success: e.Err == nil, ErrorClass: wireClass(e.ErrorClass)}
		if e.Err != nil {
			w.Error, w.Code = wireText(e.Err.Error()), ErrorCode(e.Err)
		}
		body = w
	case events.EventsDropped:
		body = eventsDropped(e)
	case events.ModelFallback:
		w := modelFallback{From: e.From, To: e.To, Reason: e.Reason}
		w.Until, w.UntilMs = wireTime(e.Until)
		body = w
	case events.ModelRevert:
		body = modelRevert(e)
	case events.SharedLimitWait:
		w := sharedLimitWait{Key: wireText(e.Key), Reason: wireText(e.Reason)}
		w.Until, w.UntilMs = wireTime(e.Until)
		body = w
	default:
		return nil, fmt.Errorf("rpc: not a session event: %T", ev)
	}
	b, err := marshal(body)
	if err != nil {
		return nil, err
	}
	head := `{"type":"` + EventType(ev) + `"` // no type needs escaping
	if string(b) == "{}" {
		return []byte(head + "}"), nil
	}
	return append([]byte(head+","), b[1:]...), nil
}

// Value returns the session event the line stands for, as the server's
// session emitted it: a events.AutoRetryStart for an auto_retry_start, and
// so on. Two fields do not cross the wire whole: an events.AutoCompactionEnd's
// Result has no Reason (the events.AutoCompactionStart before it has it), and an
// events.TurnSettled's Err has the text the server sent and matches the sentinel
// error its code names (errors.Is(err, policy.ErrExhausted)), but it is
// neither an *ExhaustedError nor the provider's Go error. A state_change
// an earlier server wrote with a rule's earlier name ("settle") has the
// rule's name now (transitions.Accept). A type this client does not know is
// an error.
func (e Event) Value() (events.Event, error) {
	var err error
	decode := func(v any) {
		if err = json.Unmarshal(e.Raw, v); err != nil {
			err = fmt.Errorf("rpc: decoding %s: %w", e.Type, err)
		}
	}
	var ev events.Event
	switch e.Type {
	case "agent_start":
		ev = events.AgentStart{}
	case "turn_start":
		ev = events.CallStart{}
	case "turn_end":
		ev = events.CallEnd{}
	case "message_start":
		var w messageEvent
		decode(&w)
		ev = events.MessageStart(w)
	case "message_end":
		var w messageEvent
		decode(&w)
		ev = events.MessageEnd(w)
	case "message_update":
		var w messageUpdate
		decode(&w)
		ev = events.MessageUpdate{Message: w.Message, Delta: events.Delta(w.Delta)}
	case "agent_end":
		var w agentEnd
		decode(&w)
		ev = events.AgentEnd(w)
	case "auto_retry_start":
		var w autoRetryStart
		decode(&w)
		start := events.AutoRetryStart{Attempt: w.Attempt, MaxAttempts: w.MaxAttempts, DelayMs: w.DelayMs, ErrorMessage: w.ErrorMessage,
			ErrorClass: classify.Class(w.ErrorClass), Provider: w.Provider, Model: w.Model, Credential: w.Credential, MaxElapsedMs: w.MaxElapsedMs,
			ResetAt: timeOfWire(w.ResetAtMs)}
		if w.ElapsedMs != nil {
			start.ElapsedMs = *w.ElapsedMs
		}
		if w.RemainingMs != nil {
			start.RemainingMs = *w.RemainingMs
		}
		ev = start
	case "auto_retry_end":
		var w autoRetryEnd
		decode(&w)
		ev = events.AutoRetryEnd{Success: w.Success, Attempt: w.Attempt, FinalError: w.FinalError, Outcome: w.Outcome, ErrorClass: classify.Class(w.ErrorClass),
			Limit: w.Limit, ResetWait: w.ResetWait}
	case "auto_compaction_start":
		var w autoCompactionStart
		decode(&w)
		ev = events.AutoCompactionStart(w)
	case "auto_compaction_end":
		var w autoCompactionEnd
		decode(&w)
		end := events.AutoCompactionEnd{Aborted: w.Aborted, WillRetry: w.WillRetry, ErrorMessage: w.ErrorMessage}
		if w.Result != nil {
			res := w.Result.compaction("")
			end.Result = &res
		}
		ev = end
	case "state_change":
		var w stateChange
		decode(&w)
		if now, ok := renamedTriggers[w.Trigger]; ok {
			w.Trigger = now
		}
		ev = events.StateChange(w)
	case "turn_settled":
		var w turnSettled
		decode(&w)
		ev = events.TurnSettled{Err: w.err(), ErrorClass: classify.Class(w.ErrorClass)}
	case "events_dropped":
		var w eventsDropped
		decode(&w)
		ev = events.EventsDropped(w)
	case "model_fallback":
		var w modelFallback
		decode(&w)
		ev = events.ModelFallback{From: w.From, To: w.To, Reason: w.Reason, Until: timeOfWire(w.UntilMs)}
	case "model_revert":
		var w modelRevert
		decode(&w)
		ev = events.ModelRevert(w)
	case "shared_limit_wait":
		var w sharedLimitWait
		decode(&w)
		ev = events.SharedLimitWait{Key: w.Key, Until: timeOfWire(w.UntilMs), Reason: w.Reason}
	default:
		return nil, fmt.Errorf("rpc: unknown event type %q", e.Type)
	}
	if err != nil {
		return nil, err
	}
	return ev, nil
}

// errorCodes are turn_settled's codes, each naming the sentinel error a
// turn's error matches, in the order ErrorCode tries them at one depth: an
// exhausted chain's error also matches ErrProvider.
var errorCodes = []struct {
	code string
	err  error
}{
	{"exhausted", policy.ErrExhausted},
	{"retry_cancelled", policy.ErrRetryCancelled},
	{"aborted", policy.ErrAborted},
	{"overflow", policy.ErrOverflow},
	{"start_failed", policy.ErrStartFailed},
	{"history", policy.ErrHistory},
	{"provider", policy.ErrProvider},
}

// ErrorCode returns turn_settled's code for a turn's error (docs/rpc.md):
// the code of the session's sentinel error err matches nearest its top,
// such as "exhausted" for policy.ErrExhausted; "" for nil and for an error that
// matches none. A provider error whose own Go error happens to wrap
// policy.ErrAborted is "provider". An error in the chain that has a
// method ErrorCode() string, such as a driver's own error, gives that
// code ahead of the sentinels at its depth.
func ErrorCode(err error) string {
	for level := []error{err}; len(level) > 0; {
		for _, e := range level {
			if c, ok := e.(interface{ ErrorCode() string }); ok && c.ErrorCode() != "" {
				return c.ErrorCode()
			}
		}
		for _, c := range errorCodes {
			for _, e := range level {
				if is, ok := e.(interface{ Is(error) bool }); e == c.err || ok && is.Is(c.err) {
					return c.code
				}
			}
		}
		var next []error
		for _, e := range level {
			switch u := e.(type) {
			case interface{ Unwrap() error }:
				if inner := u.Unwrap(); inner != nil {
					next = append(next, inner)
				}
			case interface{ Unwrap() []error }:
				next = append(next, u.Unwrap()...)
			}
		}
		level = next
	}
	return ""
}

// err is the turn's error, nil when it succeeded: the text the server
// sent, matching the sentinel error its code names (an exhausted chain's
// policy.ErrProvider too). An unknown code matches nothing.
func (w turnSettled) err() error {
	if w.Success {
		return nil
	}
	e := &turnError{text: w.Error}
	for _, c := range errorCodes {
		if c.code == w.Code {
			e.errs = append(e.errs, c.err)
		}
	}
	if w.Code == "exhausted" {
		e.errs = append(e.errs, policy.ErrProvider)
	}
	return e
}

// turnError is a turn's error as a server reported it.
type turnError struct {
	text string
	errs []error
}

func (e *turnError) Error() string   { return e.text }
func (e *turnError) Unwrap() []error { return e.errs }

// wireTime is t on the wire: RFC 3339 in UTC to the millisecond, and Unix
// milliseconds; "" and 0 for the zero time.
func wireTime(t time.Time) (string, int64) {
	if t.IsZero() {
		return "", 0
	}
	return t.UTC().Format(rfc3339Millis), t.UnixMilli()
}

// timeOfWire is the time of Unix milliseconds ms read from the wire, in
// UTC; the zero time for 0.
func timeOfWire(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// rfc3339Millis is RFC 3339 with milliseconds, always three digits.
const rfc3339Millis = "2006-01-02T15:04:05.000Z07:00"
