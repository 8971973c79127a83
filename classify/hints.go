package classify

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// hintRule is one of the retry-hint forms of docs/policy.md §2.4, in precedence
// order.
type hintRule struct {
	name string
	// parse turns the value after "name:" or "name=" into a duration.
	parse func(value string, now time.Time) (time.Duration, bool)
	// digits: the value is \d+; otherwise it is [^\s,;]+.
	digits bool
}

var hintRules = [...]hintRule{
	{"retry-after-ms", parseMillis, true},
	{"retry-after", parseRetryAfter, false},
	{"x-ratelimit-reset-ms", parseResetMillis, true},
	{"x-ratelimit-reset", parseResetSeconds, true},
}

// RetryAfter reads a server's retry hint from error text (docs/policy.md §2.4). The
// first form that matches with a usable value wins, all without regard to
// case:
//
//  1. retry-after-ms: N (or =N): N milliseconds;
//  2. retry-after: V: V seconds when V is a number (fractions allowed),
//     otherwise a date (RFC 3339, or an HTTP date), as the time from now
//     until then;
//  3. x-ratelimit-reset-ms: N: above 10^12 an epoch in milliseconds (the
//     time until then), else N milliseconds;
//  4. x-ratelimit-reset: N: above 10^9 an epoch in seconds, else N seconds.
//
// Results are never negative (a time in the past is 0) and saturate at the
// largest Duration. ok is false when the text holds no hint. now is read only
// for the absolute forms. RetryAfter does not allocate.
func RetryAfter(text string, now time.Time) (d time.Duration, ok bool) {
	if strings.IndexByte(text, '-') < 0 {
		return 0, false // every form has a dash
	}
	for _, r := range hintRules {
		for at := 0; ; {
			i := indexLower(text[at:], []byte(r.name))
			if i < 0 {
				break
			}
			start := at + i + len(r.name)
			at = at + i + 1
			j := skipSpace(text, start)
			if j >= len(text) || (text[j] != ':' && text[j] != '=') {
				continue
			}
			j = skipSpace(text, j+1)
			k := scanValue(text, j, r.digits)
			if k == j {
				continue
			}
			if d, ok := r.parse(text[j:k], now); ok {
				return d, true
			}
		}
	}
	return 0, false
}

// headerHint reads a retry hint from response headers, in the precedence of
// RetryAfter, with whole header values (so an HTTP date with its spaces
// parses).
func headerHint(headers map[string]string, now time.Time) (time.Duration, bool) {
	if len(headers) == 0 {
		return 0, false
	}
	for _, r := range hintRules {
		for name, value := range headers {
			if len(name) == len(r.name) && hasLitAt(name, 0, []byte(r.name)) {
				if d, ok := r.parse(trimSpace(value), now); ok {
					return d, true
				}
			}
		}
	}
	return 0, false
}

func parseMillis(v string, _ time.Time) (time.Duration, bool) {
	n, ok := parseUint(v)
	return saturate(n, time.Millisecond), ok
}

func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if secs, err := strconv.ParseFloat(v, 64); err == nil && isDecimal(v) {
		if secs*float64(time.Second) >= math.MaxInt64 {
			return math.MaxInt64, true
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	for _, layout := range []string{time.RFC3339Nano, time.RFC1123, time.RFC850, time.ANSIC} {
		if t, err := time.Parse(layout, v); err == nil {
			return max(t.Sub(now), 0), true
		}
	}
	return 0, false
}

func parseResetMillis(v string, now time.Time) (time.Duration, bool) {
	n, ok := parseUint(v)
	if !ok {
		return 0, false
	}
	if n > 1e12 {
		return untilEpoch(n, time.Millisecond, now), true
	}
	return saturate(n, time.Millisecond), true
}

func parseResetSeconds(v string, now time.Time) (time.Duration, bool) {
	n, ok := parseUint(v)
	if !ok {
		return 0, false
	}
	if n > 1e9 {
		return untilEpoch(n, time.Second, now), true
	}
	return saturate(n, time.Second), true
}

// untilEpoch is the time from now until epoch n in units of unit, never
// negative.
func untilEpoch(n uint64, unit time.Duration, now time.Time) time.Duration {
	nowUnits := uint64(max(now.UnixNano(), 0)) / uint64(unit)
	if n <= nowUnits {
		return 0
	}
	return saturate(n-nowUnits, unit)
}

// saturate returns n×unit, or the largest Duration when that overflows.
func saturate(n uint64, unit time.Duration) time.Duration {
	if n > uint64(math.MaxInt64)/uint64(unit) {
		return math.MaxInt64
	}
	return time.Duration(n) * unit
}

// parseUint parses decimal digits, saturating instead of failing on
// overflow.
func parseUint(v string) (uint64, bool) {
	if v == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(v); i++ {
		if !isDigit(v[i]) {
			return 0, false
		}
		if n > (math.MaxUint64-9)/10 {
			n = math.MaxUint64
			continue
		}
		n = n*10 + uint64(v[i]-'0')
	}
	return n, true
}

// isDecimal reports whether v is digits with at most one decimal point: the
// numbers a Retry-After value may be (no sign, exponent, hex or "Inf").
func isDecimal(v string) bool {
	digits, dots := 0, 0
	for i := 0; i < len(v); i++ {
		switch {
		case isDigit(v[i]):
			digits++
		case v[i] == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanValue returns the end of the value starting at i: \d+ when digits,
// else [^\s,;]+ with JavaScript's \s.
func scanValue(s string, i int, digits bool) int {
	for i < len(s) {
		if digits {
			if !isDigit(s[i]) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == ',' || r == ';' || isSpace(r) {
			return i
		}
		i += size
	}
	return i
}

// isSpace is JavaScript's \s.
func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// skipSpace returns the index of the first byte at or after i that does not
// start a JavaScript whitespace character.
func skipSpace(s string, i int) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isSpace(r) {
			return i
		}
		i += size
	}
	return i
}

func trimSpace(s string) string {
	i := skipSpace(s, 0)
	j := len(s)
	for j > i {
		r, size := utf8.DecodeLastRuneInString(s[:j])
		if !isSpace(r) {
			break
		}
		j -= size
	}
	return s[i:j]
}

// toLower lowers an ASCII letter.
func toLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
