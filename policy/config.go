package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/agentfsm/agentfsm/classify"
)

// Config holds a session's settings (docs/policy.md §3.1 and §4.1). The JSON tags
// are the settings keys: {"retry":{"maxRetries":3,…},"compaction":{…}}.
// Start from DefaultConfig: the zero value turns retry and compaction off.
type Config struct {
	Retry      RetryConfig      `json:"retry"`
	Compaction CompactionConfig `json:"compaction"`
	// Fallback is the model fallback chain (docs/policy.md §3.9); nil, the
	// default and the reference's, for none. It is left out of the JSON
	// when nil, so settings and snapshots without it read as before.
	Fallback *FallbackConfig `json:"fallback,omitempty"`
}

// RetryConfig is the retry group of settings.
//
// A delay is a whole number of milliseconds and never longer than
// 9,223,372,036,854 ms (about 292 years, the largest whole number of
// milliseconds a time.Duration holds): each step of its computation
// saturates there instead of overflowing, whatever the settings and the
// attempt, and the delayMs auto_retry_start reports is the wait scheduled.
type RetryConfig struct {
	// Enabled: off, retryable errors are not retried.
	Enabled bool `json:"enabled"`
	// MaxRetries is the number of retries in one chain; -1 means no count
	// limit, which needs a time budget (MaxElapsedMs above 0).
	MaxRetries int `json:"maxRetries"`
	// MaxElapsedMs is the chain's time budget, measured from its first
	// failure (the end of the run that started it): a retry whose delay
	// would end past it is not scheduled, and the chain ends as exhausted,
	// naming the budget. 0 means no time budget. A chain ends at whichever
	// of MaxRetries and MaxElapsedMs comes first. It is left out of the
	// JSON when 0, so a snapshot written before it existed reads the same.
	MaxElapsedMs int64 `json:"maxElapsedMs,omitempty"`
	// BaseDelayMs is the first delay; attempt n waits BaseDelayMs×2^(n−1),
	// at most the longest delay (see RetryConfig).
	BaseDelayMs int64 `json:"baseDelayMs"`
	// MaxDelayMs caps one delay; 0 means no cap but the longest delay.
	MaxDelayMs int64 `json:"maxDelayMs"`
	// Jitter, in 0..1, multiplies each delay by a random factor in
	// [1−Jitter, 1] (the result truncated to whole milliseconds).
	Jitter float64 `json:"jitter"`
	// HonorRetryAfter makes each delay at least the server's retry hint,
	// rounded up to a whole millisecond and at most the longest delay; a hint above
	// MaxDelayMs (when set) ends the chain at once instead.
	HonorRetryAfter bool `json:"honorRetryAfter"`
	// Rules is the classification rule set: extended (the default) or seed
	// (the reference's).
	Rules classify.Rules `json:"rules"`
	// WaitForReset: on, a run that ends on a usage limit (or on a retry
	// hint above MaxDelayMs, honoured), with no credential to switch to
	// and the reset time known (the server's retry hint), waits until the
	// reset and then continues the turn, as a retry of the chain; a reset
	// more than MaxResetWaitMs away fails the turn, naming it. Off (the
	// default, and the reference's), such a run is retried or ends the
	// chain as any other.
	WaitForReset bool `json:"waitForReset,omitempty"`
	// MaxResetWaitMs bounds the wait for a reset: 18,000,000 (5 hours) in
	// DefaultConfig (0 in ReferenceConfig); 0 waits for no reset still to
	// come. It is read only with WaitForReset.
	MaxResetWaitMs int64 `json:"maxResetWaitMs,omitempty"`
}

// defaultMaxResetWaitMs is retry.maxResetWaitMs by default: 5 hours, the
// usage window of the providers that reset a quota every few hours.
const defaultMaxResetWaitMs = 5 * 60 * 60 * 1000

// CompactionConfig is the compaction group of settings.
type CompactionConfig struct {
	// Enabled: off, nothing compacts automatically.
	Enabled bool `json:"enabled"`
	// ReserveTokens is the room kept free below the context window.
	ReserveTokens int `json:"reserveTokens"`
	// KeepRecentTokens is about how many tokens of recent messages a
	// compaction keeps as they are.
	KeepRecentTokens int `json:"keepRecentTokens"`
}

// DefaultConfig returns the defaults for real use: retry on, 3 retries
// from 2000 ms, each delay capped at 60 s, no jitter, the server's retry
// hint honoured (a hint above the cap ends the chain unless the credential
// switches), the extended rules, no wait for a usage limit's reset
// (retry.waitForReset off) but a bound of 5 hours should it be turned on;
// compaction on, 16384 reserve tokens, 20000
// recent tokens kept. docs/policy.md §11 lists how it differs from
// ReferenceConfig.
func DefaultConfig() Config {
	c := ReferenceConfig()
	c.Retry.MaxDelayMs = 60000
	c.Retry.HonorRetryAfter = true
	c.Retry.Rules = classify.Extended
	c.Retry.MaxResetWaitMs = defaultMaxResetWaitMs
	return c
}

// ReferenceConfig returns the reference agent's policy exactly: retry on,
// 3 retries from 2000 ms, no cap, no jitter, hints not honoured, the seed
// rules, no wait for a usage limit's reset (retry.waitForReset off, and
// its bound 0); compaction on, 16384 reserve tokens, 20000 recent tokens
// kept. The command line names it "reference" (--settings reference).
func ReferenceConfig() Config {
	return Config{
		Retry:      RetryConfig{Enabled: true, MaxRetries: 3, BaseDelayMs: 2000, Rules: classify.Seed},
		Compaction: CompactionConfig{Enabled: true, ReserveTokens: 16384, KeepRecentTokens: 20000},
	}
}

// PatientConfig returns the preset for unattended runs: DefaultConfig with
// no count limit (MaxRetries −1), a 30-minute time budget (MaxElapsedMs
// 1,800,000) and each delay capped at 60 s. Its delays are 2, 4, 8, 16,
// 32 s, then 60 s each; with runs that fail at once it makes 33 retries
// and gives up 29 min 2 s after the chain's first failure (docs/session.md,
// "The patient preset"). The command line names it "patient" (--settings
// patient).
func PatientConfig() Config {
	c := DefaultConfig()
	c.Retry.MaxRetries = -1
	c.Retry.MaxElapsedMs = 30 * 60 * 1000
	c.Retry.MaxDelayMs = 60000
	return c
}

// Validate reports the first invalid setting, naming its key: negative
// numbers (but retry.maxRetries −1, no count limit), jitter outside 0..1,
// a fallback with no model, more than 16, an empty or repeated model ID
// or an unknown fallback.after,
// an unknown rule set, a chain bound by neither limit (retry.maxRetries
// −1 with retry.maxElapsedMs 0), and retries without a count limit that
// would not wait (retry.maxRetries −1 with retry.baseDelayMs 0).
func (c Config) Validate() error {
	// One if per rule rather than a switch: each reads as one line of the
	// list, and a mutation test counts a case condition as code no test runs.
	if c.Retry.MaxRetries < -1 {
		return invalid("retry.maxRetries", "must be -1 (no count limit) or more, got %d", c.Retry.MaxRetries)
	}
	if c.Retry.MaxElapsedMs < 0 {
		return invalid("retry.maxElapsedMs", "must not be negative, got %d", c.Retry.MaxElapsedMs)
	}
	if c.Retry.MaxRetries == -1 && c.Retry.MaxElapsedMs == 0 {
		return invalid("retry.maxRetries", "-1 (no count limit) needs a time budget: retry.maxElapsedMs above 0")
	}
	if c.Retry.BaseDelayMs < 0 {
		return invalid("retry.baseDelayMs", "must not be negative, got %d", c.Retry.BaseDelayMs)
	}
	if c.Retry.MaxRetries == -1 && c.Retry.BaseDelayMs == 0 {
		// Runs that fail at once would retry in a tight loop for the whole
		// budget: millions of calls to a provider that is down.
		return invalid("retry.baseDelayMs", "must be above 0 with retry.maxRetries -1 (no count limit): 0 would retry at once, without end, until the time budget runs out")
	}
	if c.Retry.MaxDelayMs < 0 {
		return invalid("retry.maxDelayMs", "must not be negative, got %d", c.Retry.MaxDelayMs)
	}
	if !(c.Retry.Jitter >= 0 && c.Retry.Jitter <= 1) {
		return invalid("retry.jitter", "must be between 0 and 1, got %v", c.Retry.Jitter)
	}
	if c.Retry.Rules != classify.Seed && c.Retry.Rules != classify.Extended {
		return invalid("retry.rules", "must be seed or extended, got %s", c.Retry.Rules)
	}
	if c.Retry.MaxResetWaitMs < 0 {
		return invalid("retry.maxResetWaitMs", "must not be negative, got %d", c.Retry.MaxResetWaitMs)
	}
	if c.Compaction.ReserveTokens < 0 {
		return invalid("compaction.reserveTokens", "must not be negative, got %d", c.Compaction.ReserveTokens)
	}
	if c.Compaction.KeepRecentTokens < 0 {
		return invalid("compaction.keepRecentTokens", "must not be negative, got %d", c.Compaction.KeepRecentTokens)
	}
	return validFallback(c.Fallback)
}

// ErrInvalidConfig matches every error Validate and ParseConfig return.
var ErrInvalidConfig = errors.New("policy: invalid settings")

func invalid(key, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s", ErrInvalidConfig, key, fmt.Sprintf(format, args...))
}

// ParseConfig reads settings, one JSON object, over DefaultConfig: keys
// left out keep their defaults. Every error matches ErrInvalidConfig and
// names what is wrong: the dotted key ("retry.maxRetry") for an unknown
// key, a null, a key given twice in one object ("retry.maxRetries appears
// twice"), a mistyped or out-of-range value and an invalid setting; "the
// settings" for input that is empty, not JSON, not an object, or followed by
// more text. A null is never "keep the default": leave the key out for that.
// Every occurrence of a key counts: a null is refused even when the same key
// follows again.
func ParseConfig(data []byte) (Config, error) {
	if json.Valid(data) {
		if err := checkShape(data); err != nil {
			return Config{}, err
		}
	}
	cfg := DefaultConfig()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, configDecodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%w: text after the settings object", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func configDecodeError(err error) error {
	if errors.Is(err, ErrInvalidConfig) {
		return err // a fallback model's own, which names its key
	}
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		key := typeErr.Field
		if key == "" {
			key = "the settings"
		}
		if num, ok := strings.CutPrefix(typeErr.Value, "number "); ok {
			// A number that the field cannot hold: a fraction or too big.
			want := "a number"
			switch typeErr.Type.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				want = "an integer"
			}
			return invalid(key, "must be %s in range, got %s", want, num)
		}
		return invalid(key, "has the wrong type (a JSON %s)", typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("%w: the settings are not valid JSON: %v (byte %d)", ErrInvalidConfig, syntaxErr, syntaxErr.Offset)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: the settings are empty", ErrInvalidConfig)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the settings end early", ErrInvalidConfig)
	}
	if errors.Is(err, classify.ErrUnknownRules) {
		return invalid("retry.rules", "must be seed or extended")
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Errorf("%w: unknown key %s", ErrInvalidConfig, rest)
	}
	return fmt.Errorf("%w: the settings: %s", ErrInvalidConfig, strings.TrimPrefix(msg, "json: "))
}

// checkShape checks what the decoder lets through, in valid JSON: the
// settings must be an object, each group an object, and no key may be
// unknown (reported with its full dotted name, "retry.maxRetry"), null or
// given twice. It walks the tokens, so it sees every occurrence of a key:
// a null is reported even when the same key follows again. Mistyped values
// are left to the decoder.
func checkShape(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // a number is only looked at, never converted
	tok, err := dec.Token()
	if err != nil {
		return configDecodeError(err)
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("%w: the settings must be a JSON object, got %s", ErrInvalidConfig, tokenKind(tok))
	}
	return walkObject(dec, "", reflect.TypeFor[Config]())
}

// walkObject reads the members of an object whose '{' was read, through
// its '}', against the struct type t: each key must be one of t's (its
// error name is prefix+key), no value may be null, no key may occur twice,
// and a group (a struct field) must be an object, walked in turn.
func walkObject(dec *json.Decoder, prefix string, t reflect.Type) error {
	fields := jsonFields(t)
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return configDecodeError(err)
		}
		key, _ := tok.(string)
		name := prefix + key
		field, ok := fields[key]
		if !ok {
			return fmt.Errorf("%w: unknown key %q", ErrInvalidConfig, name)
		}
		if tok, err = dec.Token(); err != nil {
			return configDecodeError(err)
		}
		if field.Kind() == reflect.Pointer {
			field = field.Elem() // an optional group (fallback)
		}
		group := field.Kind() == reflect.Struct
		switch {
		case tok == nil:
			return invalid(name, "must not be null")
		case seen[key]:
			return invalid(name, "appears twice")
		case group && tok != json.Delim('{'):
			return invalid(name, "must be an object, got %s", tokenKind(tok))
		case group:
			err = walkObject(dec, name+".", field)
		default:
			err = skipValue(dec, tok)
		}
		if err != nil {
			return err
		}
		seen[key] = true
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return configDecodeError(err)
	}
	return nil
}

// skipValue reads the rest of a value that started with tok.
func skipValue(dec *json.Decoder, tok json.Token) error {
	depth := 0
	for {
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
		var err error
		if tok, err = dec.Token(); err != nil {
			return configDecodeError(err)
		}
	}
}

// tokenKind names the kind of the value that starts with tok: null, an
// object, an array, a string, a boolean or a number.
func tokenKind(tok json.Token) string {
	switch tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if tok == json.Delim('[') {
			return "an array"
		}
		return "an object"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}

// jsonFields maps a struct type's JSON names to their field types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out[name] = f.Type
	}
	return out
}
