package classify

import (
	"errors"
	"fmt"

	"github.com/agentfsm/agentfsm/transcript"
)

// Message is what the classifier reads of one assistant message: its stop
// reason, error text and usage, any typed facts the embedding code knows
// about the error, and the model's context window. Only StopReason is
// required; every other field may be left zero.
type Message struct {
	StopReason   transcript.StopReason
	ErrorMessage string
	Usage        transcript.Usage

	// Status is the HTTP status of the failed request; 0 when unknown.
	Status int
	// ErrorType is the provider's error type or code, such as
	// "overloaded_error", "rate_limit_error", "invalid_request_error" or
	// "insufficient_quota".
	ErrorType string
	// Headers are response headers that carry retry hints (Retry-After,
	// retry-after-ms, x-ratelimit-reset-ms, x-ratelimit-reset, Anthropic's
	// anthropic-ratelimit-*-reset and -remaining, OpenAI's
	// x-ratelimit-reset-{requests,tokens} and
	// x-ratelimit-remaining-{requests,tokens}; see RetryAfter), by name;
	// names are matched without regard to case.
	Headers map[string]string
	// Err is the Go error behind the failure, when there is one: a
	// net.Error timeout, io.ErrUnexpectedEOF, syscall.ECONNRESET,
	// context.DeadlineExceeded and the like are transient.
	Err error

	// ContextWindow is the model's context window in tokens; 0 when unknown.
	ContextWindow int
}

// Rules selects a rule set. The zero value is Seed.
type Rules uint8

const (
	// Seed is the reference's rule set, reproduced exactly (docs/policy.md §2.1),
	// flaws included. It is the default.
	Seed Rules = iota
	// Extended fixes the seed's flaws and adds network failures and a
	// usage_limit class for quota and billing exhaustion (docs/policy.md §2.6).
	Extended
)

var rulesNames = [...]string{Seed: "seed", Extended: "extended"}

// String returns "seed" or "extended".
func (r Rules) String() string {
	if int(r) < len(rulesNames) {
		return rulesNames[r]
	}
	return fmt.Sprintf("Rules(%d)", uint8(r))
}

// ErrUnknownRules matches the error of ParseRules for a name that is not a
// rule set.
var ErrUnknownRules = errors.New("classify: unknown rule set")

// ParseRules returns the rule set named name ("seed" or "extended").
func ParseRules(name string) (Rules, error) {
	for i, n := range rulesNames {
		if n == name {
			return Rules(i), nil
		}
	}
	return 0, fmt.Errorf("%w %q (want seed or extended)", ErrUnknownRules, name)
}

// MarshalText implements encoding.TextMarshaler; it refuses invalid values.
func (r Rules) MarshalText() ([]byte, error) {
	if int(r) >= len(rulesNames) {
		return nil, fmt.Errorf("classify: invalid rule set %d", uint8(r))
	}
	return []byte(rulesNames[r]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it rejects unknown
// names and leaves r unchanged when it does.
func (r *Rules) UnmarshalText(text []byte) error {
	v, err := ParseRules(string(text))
	if err != nil {
		return err
	}
	*r = v
	return nil
}
