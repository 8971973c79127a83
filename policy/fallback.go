package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

// FallbackConfig is the fallback group of settings (docs/policy.md §3.9):
// the models a session moves to, in order, when its own keeps failing.
// Absent (a nil *FallbackConfig) the session never leaves its model.
type FallbackConfig struct {
	// Models are the fallback models, in the order they are tried after
	// the session's own (the primary). At least one, at most
	// maxFallbackModels, each named once. In JSON each is a model ID
	// ("claude-haiku-4-5") or an object {"id": ..., "contextWindow": ...}.
	Models []FallbackModel `json:"models"`
	// After says when the session moves on: "exhausted" (the default,
	// also "") when a chain on a transient error would end; "overloaded"
	// also at the first overload (HTTP 529, overloaded_error, a 503 that
	// says "overloaded"), without waiting the chain out. Either way a
	// usage limit that no credential switch answers moves on at once.
	After string `json:"after,omitempty"`
	// CooldownMs is how long the session stays on a fallback model: the
	// first turn that starts this long after the switch goes back to the
	// primary. 0 means the default, 300,000 (5 minutes).
	CooldownMs int64 `json:"cooldownMs,omitempty"`
}

// FallbackModel is one model of FallbackConfig.Models: its ID, as the
// provider names it, and its context window in tokens, 0 when it is the
// primary's.
type FallbackModel struct {
	ID            string `json:"id"`
	ContextWindow int    `json:"contextWindow,omitempty"`
}

// UnmarshalJSON reads a fallback model as the settings give it: a string,
// its ID, or an object with "id" and "contextWindow" and nothing else.
func (m *FallbackModel) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var id string
		if err := json.Unmarshal(data, &id); err != nil {
			return invalid("fallback.models", "a model is not a valid JSON string: %v", err)
		}
		*m = FallbackModel{ID: id}
		return nil
	}
	if len(data) == 0 || data[0] != '{' {
		return invalid("fallback.models", "each model must be an ID (a string) or an object {\"id\", \"contextWindow\"}, got %s", jsonKind(data))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return invalid("fallback.models", "a model is not a valid JSON object: %v", err)
	}
	for k, v := range raw {
		if k != "id" && k != "contextWindow" {
			return fmt.Errorf("%w: unknown key %q", ErrInvalidConfig, "fallback.models."+k)
		}
		if string(bytes.TrimSpace(v)) == "null" {
			return invalid("fallback.models."+k, "must not be null")
		}
	}
	type plain FallbackModel
	var p plain
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&p); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return invalid("fallback.models."+typeErr.Field, "has the wrong type or is out of range (a JSON %s)", typeErr.Value)
		}
		var syntaxErr *json.SyntaxError
		if errors.As(err, &syntaxErr) {
			return invalid("fallback.models", "a model is not valid JSON: %v", err)
		}
		return invalid("fallback.models", "%v", err)
	}
	*m = FallbackModel(p)
	return nil
}

// jsonKind names the kind of the JSON value data holds.
func jsonKind(data []byte) string {
	switch {
	case len(data) == 0:
		return "nothing"
	case data[0] == '[':
		return "an array"
	case data[0] == 'n':
		return "null"
	case data[0] == 't' || data[0] == 'f':
		return "a boolean"
	}
	return "a number"
}

// The values of fallback.after.
const (
	fallbackAfterExhausted  = "exhausted"
	fallbackAfterOverloaded = "overloaded"
)

// defaultCooldownMs is fallback.cooldownMs by default: 5 minutes.
const defaultCooldownMs = 5 * 60 * 1000

// maxFallbackModels bounds fallback.models: a list longer than this is a
// mistake, not a plan.
const maxFallbackModels = 16

// validFallback reports the first invalid fallback setting, naming its key.
func validFallback(f *FallbackConfig) error {
	if f == nil {
		return nil
	}
	switch {
	case len(f.Models) == 0:
		return invalid("fallback.models", "must name at least one model")
	case len(f.Models) > maxFallbackModels:
		return invalid("fallback.models", "must name at most %d models, got %d", maxFallbackModels, len(f.Models))
	case f.After != "" && f.After != fallbackAfterExhausted && f.After != fallbackAfterOverloaded:
		return invalid("fallback.after", "must be exhausted or overloaded, got %q", f.After)
	case f.CooldownMs < 0:
		return invalid("fallback.cooldownMs", "must not be negative, got %d", f.CooldownMs)
	}
	for i, m := range f.Models {
		switch {
		case strings.TrimSpace(m.ID) == "":
			return invalid("fallback.models.id", "must not be empty (model %d of the list)", i+1)
		case !utf8.ValidString(m.ID):
			return invalid("fallback.models.id", "%q is not valid UTF-8 (model %d of the list)", m.ID, i+1)
		case m.ContextWindow < 0:
			return invalid("fallback.models.contextWindow", "must not be negative, got %d (model %d of the list)", m.ContextWindow, i+1)
		}
		if j := slices.IndexFunc(f.Models[:i], func(o FallbackModel) bool { return o.ID == m.ID }); j >= 0 {
			return invalid("fallback.models", "names %q twice (models %d and %d of the list)", m.ID, j+1, i+1)
		}
	}
	return nil
}

// cloneFallback is a deep copy of f: an engine keeps its own.
func cloneFallback(f *FallbackConfig) *FallbackConfig {
	if f == nil {
		return nil
	}
	c := *f
	c.Models = slices.Clone(f.Models)
	return &c
}

// fallback is a session's model fallback chain while the setting is on:
// its models, the one in use and how long it stays there. An engine
// without the setting has none (nil), and pays for it one pointer.
type fallback struct {
	// models are the primary (0) and the fallback models, in order, each
	// a whole Model: the primary's provider and endpoint, its own ID and
	// window (the primary's when the setting gives none).
	models []Model
	// at is the index in models of the model in use; from, the one the
	// turn in flight started on (the turn tried models[from..at]).
	at, from int
	// onOverload is fallback.after "overloaded".
	onOverload bool
	// cooldown is fallback.cooldownMs as a duration; until, when the
	// model in use returns to the primary, in Unix nanoseconds: the first
	// turn that starts at or after it reverts (0 on the primary).
	cooldown time.Duration
	until    int64
}

// newFallback is the fallback chain of cfg for the primary model p; nil
// when cfg has none. It fails when a fallback model is the primary itself.
func newFallback(p Model, cfg *FallbackConfig) (*fallback, error) {
	if cfg == nil {
		return nil, nil
	}
	fb := &fallback{models: make([]Model, 0, len(cfg.Models)+1), onOverload: cfg.After == fallbackAfterOverloaded,
		cooldown: msToDuration(cfg.CooldownMs)}
	if cfg.CooldownMs == 0 {
		fb.cooldown = defaultCooldownMs * time.Millisecond
	}
	fb.models = append(fb.models, p)
	for i, m := range cfg.Models {
		if m.ID == p.ID {
			return nil, invalid("fallback.models", "names %q, the session's own model (model %d of the list)", m.ID, i+1)
		}
		fm := p
		fm.ID = m.ID
		if m.ContextWindow > 0 {
			fm.ContextWindow = m.ContextWindow
		}
		fb.models = append(fb.models, fm)
	}
	return fb, nil
}

// index returns the index of the model id in the chain, -1 when it is in
// none.
func (fb *fallback) index(id string) int {
	return slices.IndexFunc(fb.models, func(m Model) bool { return m.ID == id })
}

// tried names the models the turn in flight tried, in order.
func (fb *fallback) tried() []string {
	models := fb.models[fb.from : fb.at+1]
	out := make([]string, len(models))
	for i, m := range models {
		out[i] = m.ID
	}
	return out
}

// isOverload reports whether m is an overload: HTTP 529, the error type
// overloaded_error, or an error text that says "overloaded" (a 503
// "overloaded" among them).
func isOverload(m *transcript.Message) bool {
	if m.HTTPStatus == 529 || m.ErrorType == "overloaded_error" {
		return true
	}
	text := m.ErrorMessage
	if text == "" && m.Err != nil {
		text = m.Err.Error()
	}
	return containsFold(text, "overloaded")
}

// containsFold reports whether s holds sub, ASCII letters matched without
// regard to case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// fallbackFacts sets the facts of the fallback for the decision on m, the
// message of a run that failed with a retryable error: whether a model is
// left to move to, whether m is an overload, and whether the context is
// over the next model's compaction threshold.
func (e *Engine) fallbackFacts(m *transcript.Message, available *bool, onOverload, overloaded, tooSmall *bool) {
	fb := e.fb
	if fb == nil || fb.at+1 >= len(fb.models) {
		return
	}
	*available, *onOverload, *overloaded = true, fb.onOverload, isOverload(m)
	next := fb.models[fb.at+1]
	if limit, ok := transitions.CompactionThreshold(next.ContextWindow, e.cfg.Compaction.ReserveTokens); ok {
		*tooSmall = e.calib.tokens(sizes.Tokens(e.contextWithout(m)...)) > limit
	}
}

// switchModel moves the session to the next model of the chain, for the
// continuation that follows and the turns after it until the cooldown is
// over, and reports it: model_fallback.
func (e *Engine) switchModel(s *step) {
	fb := e.fb
	if fb == nil || fb.at+1 >= len(fb.models) {
		return // the guard holds only with a model to move to
	}
	from := fb.models[fb.at]
	fb.at++
	e.model = fb.models[fb.at]
	// The cooldown's end saturates at the latest instant the engine
	// keeps: a longer one must not wrap to the past (and revert at once).
	fb.until = math.MaxInt64
	if now := s.at.UnixNano(); now < 0 || int64(fb.cooldown) <= math.MaxInt64-now {
		fb.until = now + int64(fb.cooldown)
	}
	until := time.Unix(0, fb.until)
	reason := events.FallbackExhausted
	switch f := s.facts; {
	case f.UsageLimit && !f.CredentialSwitched:
		reason = events.FallbackUsageLimit
	case f.Overloaded && f.FallbackOnOverload:
		reason = events.FallbackOverloaded
	}
	e.emit(events.ModelFallback{From: from.ID, To: e.model.ID, Reason: reason, Until: until.UTC()})
}

// revertModel moves the session back to its primary model and reports it:
// model_revert.
func (e *Engine) revertModel() {
	fb := e.fb
	if fb == nil || fb.at == 0 {
		return
	}
	from := fb.models[fb.at]
	fb.at, fb.from, fb.until = 0, 0, 0
	e.model = fb.models[0]
	e.emit(events.ModelRevert{From: from.ID, To: e.model.ID})
}

// primary is the session's own model: the one it was made with, whichever
// it is on.
func (e *Engine) primary() Model {
	if e.fb != nil {
		return e.fb.models[0]
	}
	return e.model
}

// modelsTriedError is the error of a turn that tried more than one model:
// err, whose text it ends with the models' names.
type modelsTriedError struct {
	err    error
	models []string
}

func (m *modelsTriedError) Error() string {
	return fmt.Sprintf("%v (models tried: %s)", m.err, strings.Join(m.models, ", "))
}

func (m *modelsTriedError) Unwrap() error { return m.err }

// withModelsTried is err, naming the models the turn tried when it tried
// more than one.
func (e *Engine) withModelsTried(err error) error {
	if fb := e.fb; fb != nil && err != nil && fb.at > fb.from {
		return &modelsTriedError{err: err, models: fb.tried()}
	}
	return err
}
