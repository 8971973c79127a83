package classify

import (
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/agentfsm/agentfsm/transcript"
)

// Rule names a rule of the classification order (see Rules.Classify).
type Rule string

// The rules Explain reports.
const (
	// RuleStopReason: the message is not an error (Value: its stop reason).
	RuleStopReason Rule = "stop reason"
	// RuleSilentOverflow: a "stop" whose input and cache reads exceed the
	// context window.
	RuleSilentOverflow Rule = "silent overflow"
	// RuleTruncatedOverflow: a "length" with no output whose input and
	// cache reads reach 99% of the context window.
	RuleTruncatedOverflow Rule = "truncated overflow"
	// RuleErrorType: the message's ErrorType decided (Value: the type).
	RuleErrorType Rule = "error type"
	// RuleStatus: the message's HTTP Status decided (Value: the status).
	RuleStatus Rule = "HTTP status"
	// RuleGoError: the message's Go error is a network or timeout failure.
	RuleGoError Rule = "Go error"
	// RulePattern: a text pattern matched (Pattern, Group, Source).
	RulePattern Rule = "pattern"
	// RuleNoPattern: no typed field decided and no pattern of the rule set
	// (Value: its name; empty when there was no text) matched.
	RuleNoPattern Rule = "no pattern"
	// RuleHeaderHint and RuleTextHint: the retry hint, from the headers or
	// from the text (Value: the duration).
	RuleHeaderHint Rule = "retry hint in the headers"
	RuleTextHint   Rule = "retry hint in the text"
)

// Why is one rule that took part in a classification.
type Why struct {
	Rule Rule
	// Value is what the rule read: the stop reason, the usage against the
	// window, the error type, the status, the Go error's text, the hint.
	Value string
	// Effect is what the rule made of it: "overflow", "throttle",
	// "transient", "permanent", "quota", "usage limit", "retryable",
	// "not an overflow", "fatal", "none", or "wait" for a hint.
	Effect string
	// Pattern, Group and Source: for RulePattern, the expression that
	// matched, its group (docs/classification.md's tables: "overflow",
	// "extended-retry", …) and the provider wording it covers.
	Pattern, Group, Source string
}

// String renders w on one line, for people.
func (w Why) String() string {
	switch w.Rule {
	case RulePattern:
		return fmt.Sprintf("pattern `%s` (%s; %s): %s", w.Pattern, w.Group, w.Source, w.Effect)
	case RuleNoPattern:
		if w.Value == "" {
			return "no text and no typed field: " + w.Effect
		}
		return fmt.Sprintf("no pattern of the %s rules matched: %s", w.Value, w.Effect)
	case RuleStopReason:
		return fmt.Sprintf("stop reason %q: %s", w.Value, w.Effect)
	case RuleHeaderHint, RuleTextHint:
		return fmt.Sprintf("%s: %s %s", w.Rule, w.Effect, w.Value)
	}
	if w.Rule == RuleSilentOverflow || w.Rule == RuleTruncatedOverflow {
		return fmt.Sprintf("%s (%s): %s", w.Rule, w.Value, w.Effect)
	}
	return fmt.Sprintf("%s %s: %s", w.Rule, w.Value, w.Effect)
}

// Explain classifies m as Classify does (the same Result) and says why:
// the rules that decided, in the order they were applied: a stop reason, a
// silent or truncated overflow, a typed field, the patterns that matched
// with the wording each covers, or that none did; then where the retry
// hint came from. It is for people (agentfsm classify --explain), not for
// the hot path: it allocates, and it finds each pattern with the
// regular expressions that define them.
func (r Rules) Explain(m Message, now time.Time) (Result, []Why) {
	var why []Why
	res := r.classify(m, now, &why)
	return res, why
}

// usageWhy explains an overflow read from usage (isOverflow is true, the
// message is not an error).
func usageWhy(m Message) Why {
	in, cache := max(m.Usage.Input, 0), max(m.Usage.CacheRead, 0)
	if m.StopReason == transcript.StopReasonLength {
		return Why{Rule: RuleTruncatedOverflow, Effect: "overflow",
			Value: fmt.Sprintf("length, output %d, input %d + cacheRead %d ≥ 99%% of context window %d", m.Usage.Output, in, cache, m.ContextWindow)}
	}
	return Why{Rule: RuleSilentOverflow, Effect: "overflow",
		Value: fmt.Sprintf("stop, input %d + cacheRead %d > context window %d", in, cache, m.ContextWindow)}
}

// explainText records the rules that decide an error, in the order
// classify applies them.
func (r Rules) explainText(why *[]Why, m Message, text string, bits groupBits, typed verdict, field typedField) {
	add := func(w Why) { *why = append(*why, w) }
	groups := r.groups()
	if typed == verdictOverflow {
		add(typedWhy(m, field, typed))
		return
	}
	if typed != verdictThrottle && overflowBits(bits) {
		g := groups[0]
		if bits&bitOverflow == 0 {
			g = groupExtendedOverflow
		}
		add(patternWhy(g, text, "overflow"))
		return
	}
	switch {
	case bits&(bitOverflow|bitOverflowMore) == 0:
	case bits&bitNotOverflow != 0:
		add(patternWhy(groups[1], text, "not an overflow"))
	default: // a typed throttle
		g := groups[0]
		if bits&bitOverflow == 0 {
			g = groupExtendedOverflow
		}
		add(patternWhy(g, text, "ignored: a typed throttle is not an overflow"))
	}
	usageEffect := "usage limit"
	if r == Seed {
		usageEffect = "the usage-limit branch"
	}
	if typed != verdictNone {
		add(typedWhy(m, field, typed))
		switch {
		case typed != verdictQuota && bits&bitUsage != 0:
			add(patternWhy(groups[3], text, usageEffect))
		case (typed == verdictThrottle || typed == verdictTransient) && bits&bitFatal != 0:
			add(fatalWhy(text))
		}
		return
	}
	switch {
	case r == Extended && bits&bitUsage != 0:
		add(patternWhy(groups[3], text, usageEffect))
	case bits&bitFatal != 0:
		add(fatalWhy(text))
	case bits&bitRetry != 0:
		add(patternWhy(groups[2], text, "retryable"))
		if bits&bitUsage != 0 {
			add(patternWhy(groups[3], text, usageEffect))
		}
	case text == "":
		add(Why{Rule: RuleNoPattern, Effect: "fatal"})
	default:
		add(Why{Rule: RuleNoPattern, Value: r.String(), Effect: "fatal"})
	}
}

// groups are r's pattern groups in scan-bit order.
func (r Rules) groups() [4]group {
	if r == Extended {
		return [4]group{groupOverflow, groupNotOverflow, groupExtendedRetry, groupExtendedUsage}
	}
	return [4]group{groupOverflow, groupNotOverflow, groupSeedRetry, groupUsageFlag}
}

var verdictEffects = [...]string{
	verdictOverflow:  "overflow",
	verdictQuota:     "quota",
	verdictThrottle:  "throttle (never an overflow)",
	verdictTransient: "transient",
	verdictPermanent: "permanent",
}

func typedWhy(m Message, field typedField, v verdict) Why {
	w := Why{Effect: verdictEffects[v]}
	switch field {
	case fieldErrorType:
		w.Rule, w.Value = RuleErrorType, fmt.Sprintf("%q", m.ErrorType)
	case fieldStatus:
		w.Rule, w.Value = RuleStatus, fmt.Sprint(m.Status)
	default:
		w.Rule, w.Value = RuleGoError, fmt.Sprintf("%q", m.Err.Error())
	}
	return w
}

// fatalWhy names what made a text fatal under the extended rules: a
// pattern of extended-fatal, else the budget arithmetic (overBudget).
func fatalWhy(text string) Why {
	if w := patternWhy(groupExtendedFatal, text, "fatal: no retry fixes it"); w.Pattern != "?" {
		return w
	}
	return patternWhy(groupExtendedBudget, text, "fatal: Requested is above Limit, no wait lets it through")
}

// patternWhy names the first pattern of g, in table order, that matches
// text: the scanner reports only that one did.
func patternWhy(g group, text, effect string) Why {
	low := []byte(text)
	for i, c := range low {
		if c >= 'A' && c <= 'Z' {
			low[i] = c + 'a' - 'A'
		}
	}
	defs := definitions()
	for i, p := range patterns {
		if p.Group != g {
			continue
		}
		for _, re := range defs[i] {
			if re.Match(low) {
				return Why{Rule: RulePattern, Pattern: p.Expr, Group: string(g), Source: p.Source, Effect: effect}
			}
		}
	}
	// Unreachable while the scanner agrees with the definitions (the
	// differential tests check it).
	return Why{Rule: RulePattern, Pattern: "?", Group: string(g), Source: "?", Effect: effect}
}

// definitions are each pattern's regexps, by index in patterns, compiled
// on first use.
var definitions = sync.OnceValue(func() [][]*regexp.Regexp {
	out := make([][]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		out[i] = jsRegexps(p.Expr)
	}
	return out
})
