package classify

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/agentfsm/agentfsm/transcript"
)

// Result is the classifier's answer for one message.
type Result struct {
	// Class is what the message is.
	Class Class
	// UsageLimit reports that the usage-limit branch applies (docs/policy.md §3.3):
	// always with Class UsageLimit, and under Seed for a Retryable error
	// whose text names a usage limit (§2.2).
	UsageLimit bool
	// RetryAfter is the server's retry hint, valid when HasRetryAfter: how
	// long to wait, or the time until the limit resets. It is never
	// negative. Hints are read for retryable and usage-limit errors only:
	// from the Headers first, then from the error text (§2.4, RetryAfter
	// lists the sources).
	RetryAfter    time.Duration
	HasRetryAfter bool
	// PromptTokens and ContextLimit are the numbers an overflow's error
	// text gives, in the wordings of the providers the corpus holds
	// (Anthropic's "210345 tokens > 200000 maximum", OpenAI's "your
	// messages resulted in 130512 tokens", llama.cpp's
	// exceed_context_size_error with n_prompt_tokens and n_ctx, and more):
	// the size of the request that did not fit, in tokens as the provider
	// counted it, and the limit it went over; a number above 2^40 is no
	// count. Each is 0 when the text does not give it, and both are 0 for
	// any class but Overflow.
	PromptTokens int
	ContextLimit int
}

// Classify decides what m is under the rule set r. now is the current time,
// used only to turn an absolute retry hint (an HTTP date, an epoch) into a
// duration. Classify is safe for concurrent use and does not allocate for a
// message without a Go error, unless its hint is a time of day in a named
// zone (RetryAfter).
//
// The order is the policy's: a message that is not an error is None, unless
// its usage shows a silent or truncated overflow; an overflow is never
// retryable, whatever else its text says, except that an HTTP 429 (or a
// throttling error type) is a throttle even when its text reads like an
// overflow; typed fields (Status, ErrorType, Err) decide before text; then
// the text patterns of r; anything else is Fatal. Explain says which of
// these rules decided.
func (r Rules) Classify(m Message, now time.Time) Result {
	return r.classify(m, now, nil)
}

// classify is Classify; with why non-nil it also records the rules that
// decided (Explain). Without, it records nothing and allocates nothing.
func (r Rules) classify(m Message, now time.Time, why *[]Why) Result {
	if m.StopReason != transcript.StopReasonError {
		if isOverflow(m) {
			if why != nil {
				*why = append(*why, usageWhy(m))
			}
			return Result{Class: Overflow}
		}
		if why != nil {
			*why = append(*why, Why{Rule: RuleStopReason, Value: string(m.StopReason), Effect: "none"})
		}
		return Result{Class: None}
	}
	text := m.ErrorMessage
	if text == "" && m.Err != nil {
		text = m.Err.Error()
	}
	bits := r.scanner().scan(text)
	if bits&bitBudget != 0 && overBudget(text) {
		bits |= bitFatal
	}
	typed, field := typedVerdict(m)
	if why != nil {
		r.explainText(why, m, text, bits, typed, field)
	}
	if typed != verdictThrottle && (typed == verdictOverflow || overflowBits(bits)) {
		prompt, limit := overflowCounts(text)
		return Result{Class: Overflow, PromptTokens: prompt, ContextLimit: limit}
	}
	var class Class
	switch typed {
	case verdictQuota:
		class = UsageLimit
	case verdictThrottle, verdictTransient:
		class = Retryable
		switch {
		case bits&bitUsage != 0:
			class = UsageLimit
		case bits&bitFatal != 0:
			class = Fatal // looks transient, but no retry fixes it
		}
	case verdictPermanent:
		class = Fatal
		if bits&bitUsage != 0 {
			class = UsageLimit
		}
	default:
		class = r.textClass(bits)
	}
	res := Result{Class: class, UsageLimit: class == UsageLimit}
	if r == Seed && class == UsageLimit {
		// The seed set has no usage_limit class: a usage limit is a
		// retryable error that takes the usage-limit branch.
		res.Class = Retryable
	}
	if class == Retryable || class == UsageLimit {
		var from Rule = RuleHeaderHint
		res.RetryAfter, res.HasRetryAfter = headerHint(m.Headers, now)
		if !res.HasRetryAfter {
			from = RuleTextHint
			res.RetryAfter, res.HasRetryAfter = RetryAfter(text, now)
		}
		if why != nil && res.HasRetryAfter {
			*why = append(*why, Why{Rule: from, Value: res.RetryAfter.String(), Effect: "wait"})
		}
	}
	return res
}

func (r Rules) scanner() *scanner {
	if r == Extended {
		return extendedScanner
	}
	return seedScanner
}

// textClass classifies an error (not an overflow) by its scanned text:
// under Extended a usage limit, then an error no retry fixes, then a retry;
// under Seed a retry, which is a usage limit too when the usage-limit
// sub-rule matches.
func (r Rules) textClass(bits groupBits) Class {
	switch {
	case r == Extended && bits&bitUsage != 0:
		return UsageLimit
	case bits&bitFatal != 0, bits&bitRetry == 0:
		return Fatal
	case r == Seed && bits&bitUsage != 0:
		return UsageLimit
	}
	return Retryable
}

// isOverflow reports whether m is a context overflow (docs/policy.md §2.3): an error
// whose text matches an overflow pattern and no throttle pattern, a silent
// overflow (a "stop" whose input and cache reads exceed a known context
// window) or a truncated one (a "length" with no output whose input and
// cache reads reach 99% of the window). It reads text only, with the
// policy's overflow patterns (those both rule sets share); Classify also
// weighs typed fields, and under Extended more overflow wordings. A user
// asks Classify: for a message without typed fields,
// Seed.Classify(m, now).Class == Overflow is exactly isOverflow(m).
//
// The usage checks are exact for any numbers: a negative token count
// counts as 0, and no sum or product can overflow.
func isOverflow(m Message) bool {
	w := m.ContextWindow
	in, cache := max(m.Usage.Input, 0), max(m.Usage.CacheRead, 0)
	switch m.StopReason {
	case transcript.StopReasonError:
		return overflowBits(seedScanner.scan(m.ErrorMessage))
	case transcript.StopReasonStop:
		// in + cache > w, with w − cache in [1−MaxInt, MaxInt].
		return w > 0 && in > w-cache
	case transcript.StopReasonLength:
		// in + cache ≥ 0.99 × w ⇔ in + cache ≥ ceil(0.99 × w) = w − floor(w/100).
		return w > 0 && m.Usage.Output <= 0 && in >= w-w/100-cache
	}
	return false
}

// overflowBits: an overflow pattern matched (under Extended, one of its
// own too) and no throttle pattern did.
func overflowBits(bits groupBits) bool {
	return bits&(bitOverflow|bitOverflowMore) != 0 && bits&bitNotOverflow == 0
}

// verdict is what the typed fields say on their own.
type verdict uint8

const (
	verdictNone      verdict = iota // no typed fields, or none that decide
	verdictOverflow                 // an overflow error type
	verdictQuota                    // quota or spend exhausted (insufficient_quota, billing_error)
	verdictThrottle                 // a 429 or a throttling type: never an overflow
	verdictTransient                // 408, 409, 5xx, an overload type, a transient Go error
	verdictPermanent                // 400, 401, 403, 404, a request or auth error type
)

// typedField is the typed field that decided a verdict.
type typedField uint8

const (
	fieldNone typedField = iota
	fieldErrorType
	fieldStatus
	fieldErr
)

func typedVerdict(m Message) (verdict, typedField) {
	switch strings.ToLower(m.ErrorType) {
	case "":
	case "insufficient_quota", "billing_hard_limit_reached", "billing_error", "enforced_spend_limit_reached":
		return verdictQuota, fieldErrorType
	case "request_too_large", "context_length_exceeded", "model_context_window_exceeded":
		return verdictOverflow, fieldErrorType
	case "rate_limit_error", "rate_limit_exceeded", "throttlingexception", "resource_exhausted":
		return verdictThrottle, fieldErrorType
	case "overloaded_error", "api_error", "server_error", "internal_server_error", "service_unavailable", "unavailable", "timeout":
		return verdictTransient, fieldErrorType
	case "invalid_request_error", "authentication_error", "permission_error", "not_found_error", "tool_rounds_exceeded":
		return verdictPermanent, fieldErrorType
	}
	switch s := m.Status; {
	case s == 429:
		return verdictThrottle, fieldStatus
	case s == 408 || s == 409 || (s >= 500 && s <= 599):
		return verdictTransient, fieldStatus
	case s == 400 || s == 401 || s == 403 || s == 404:
		return verdictPermanent, fieldStatus
	}
	if m.Err != nil && transientError(m.Err) {
		return verdictTransient, fieldErr
	}
	return verdictNone, fieldNone
}

// transientError reports whether err is a network or timeout failure that
// another attempt may not meet.
func transientError(err error) bool {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ETIMEDOUT) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
