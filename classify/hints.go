package classify

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// maxAhead bounds an absolute hint (a date, an epoch, a time of day): a
// reset further than this from now is no reset a provider gives but a
// broken clock or a misread number, and is ignored.
const maxAhead = 366 * 24 * time.Hour

// hintRule is one of the "name: value" retry-hint forms of docs/policy.md
// §2.4 that stand alone, in precedence order.
type hintRule struct {
	name string
	// parse turns the value after "name:" or "name=" into a duration.
	parse func(value string, now time.Time) (time.Duration, bool)
	// digits: the value is \d+; otherwise it is a token (scanValue).
	digits bool
}

var hintRules = [...]hintRule{
	{"retry-after-ms", parseMillis, true},
	{"retry-after", parseRetryAfter, false},
	{"x-ratelimit-reset-ms", parseResetMillis, true},
	{"x-ratelimit-reset", parseResetSeconds, true},
}

// resetGroup is a provider's set of per-limit reset headers, each with the
// count that remains of its limit.
type resetGroup struct {
	reset, remaining []string
	parse            func(value string, now time.Time) (time.Duration, bool)
}

var resetGroups = [...]resetGroup{
	{ // Anthropic: RFC 3339 times.
		reset: []string{
			"anthropic-ratelimit-requests-reset", "anthropic-ratelimit-tokens-reset",
			"anthropic-ratelimit-input-tokens-reset", "anthropic-ratelimit-output-tokens-reset",
		},
		remaining: []string{
			"anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-tokens-remaining",
			"anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-output-tokens-remaining",
		},
		parse: parseResetTime,
	},
	{ // OpenAI: durations such as "6m0s".
		reset:     []string{"x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"},
		remaining: []string{"x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens"},
		parse:     parseStrictSpan,
	},
}

// textRules are the "name: value" forms read in error text only: fields
// of error bodies, not headers.
var textRules = [...]hintRule{
	{"retrydelay", parseStrictSpan, false},    // Google's RetryInfo: "retryDelay": "30s"
	{"resets_in_seconds", parseSeconds, true}, // a usage limit's body: seconds
	{"resets_at", parseEpochSeconds, true},    // a usage limit's body: an epoch in seconds
}

// RetryAfter reads a server's retry hint from error text (docs/policy.md
// §2.4). The first form that gives a usable value wins, all without regard
// to case; a "name: value" form also reads name = value, and either side
// may be quoted ("name": "value", 'name': 'value', \"name\": \"value\"), as
// headers and bodies are when an SDK prints them:
//
//  1. retry-after-ms: N: N milliseconds;
//  2. retry-after: V: V seconds when V is a number (fractions allowed),
//     otherwise a date (RFC 3339, or an HTTP date), as the time from now
//     until then;
//  3. x-ratelimit-reset-ms: N: above 10^12 an epoch in milliseconds (the
//     time until then), else N milliseconds;
//  4. x-ratelimit-reset: N: above 10^9 an epoch in seconds, else N seconds;
//  5. Anthropic's anthropic-ratelimit-{requests,tokens,input-tokens,
//     output-tokens}-reset: an RFC 3339 time each; the time until the
//     latest of those whose -remaining count is 0, or, when no count is 0
//     or none is given, until the latest of them all;
//  6. OpenAI's x-ratelimit-reset-{requests,tokens}: a duration each
//     ("6m0s", "1s", "20ms", "1h2m3.5s"), chosen as in 5 by
//     x-ratelimit-remaining-{requests,tokens};
//  7. Google's retryDelay (a RetryInfo in an error body's details):
//     "30s", "1.5s";
//  8. resets_in_seconds: N: N seconds; resets_at: N: an epoch in seconds;
//  9. "try again in", "retry in", "reset in", "resets in" or "reset after" and a
//     duration: "2 hours 3 minutes", "45 minutes", "1h 2m", "30 seconds",
//     "1.574s", "6m0s", "5 days 22 hours 11 minutes";
//  10. "reset at", "resets at" or "resets" and a time of day ("3pm",
//     "3:15 PM", "15:00"), with an IANA zone in parentheses or not ("3pm
//     (America/New_York)"): the time until the next such time after now,
//     in that zone, else in UTC (a time the clocks skip, in the hour a
//     change to summer time leaves out, is the instant they skip it); a
//     zone this system does not know gives no hint;
//  11. a "|" and ten digits after a word ("usage limit reached|1767225600"):
//     an epoch in seconds.
//
// An absolute time in the past is 0; one more than a year away is ignored
// (no provider's limit resets that far ahead: the clock or the number is
// wrong). A relative value has no sign (so never negative) and saturates
// at the largest Duration. ok is false when the text holds no hint. now is
// read only for the absolute forms. RetryAfter allocates only to load a
// named time zone (once per zone).
func RetryAfter(text string, now time.Time) (d time.Duration, ok bool) {
	return hint(&source{text: text, isText: true, bytes: foldedBytes(text)}, now)
}

// headerHint reads a retry hint from response headers: forms 1 to 6 of
// RetryAfter, in its precedence, with whole header values (so an HTTP date
// with its spaces parses).
func headerHint(headers map[string]string, now time.Time) (time.Duration, bool) {
	if len(headers) == 0 {
		return 0, false
	}
	return hint(&source{headers: headers}, now)
}

// source is where hints are read: response headers, or error text.
type source struct {
	headers map[string]string
	text    string
	isText  bool
	// bytes holds every ASCII byte of text, letters lowered (see
	// foldedBytes): a name with an ASCII byte it lacks is not in text.
	bytes byteSet
}

// byteSet is a set of ASCII bytes, a bit each: bytes 0-63 in the
// first word, 64-127 in the second.
type byteSet [2]uint64

// maxPrefiltered is the longest text whose bytes foldedBytes collects.
// Collecting them is one pass over the text, which the search for each
// of the hints' ~20 names saves when a name cannot be there (most names
// in most texts: an error's text is short, and few hold a hint); a longer
// text, which a search that finds a hint early may read little of, is
// searched as it is.
const maxPrefiltered = 512

// foldedBytes is the set of text's ASCII bytes, letters lowered, for a
// text of at most maxPrefiltered bytes; for a longer one, every byte (no
// name is ruled out).
func foldedBytes(text string) byteSet {
	if len(text) > maxPrefiltered {
		return byteSet{^uint64(0), ^uint64(0)}
	}
	var low, high uint64
	for i := 0; i < len(text); i++ {
		if c := text[i]; c < 64 {
			low |= 1 << c
		} else if c < 128 {
			high |= 1 << (c - 64)
		}
	}
	// 'A'-'Z' are bits 1-26 of high, 'a'-'z' bits 33-58: an upper-case
	// letter counts as its lower case.
	const upper = (1<<26 - 1) << 1
	return byteSet{low, high | (high&upper)<<32}
}

// mayHold reports whether the text a set was collected from may hold the
// lowered literal lit, folding its ASCII letters: false when an ASCII
// byte of lit is not in set, so that indexFold(text, lit) is -1.
func (set *byteSet) mayHold(lit string) bool {
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; c < 128 && set[c>>6]&(1<<(c&63)) == 0 {
			return false
		}
	}
	return true
}

func hint(src *source, now time.Time) (time.Duration, bool) {
	for _, r := range hintRules {
		if d, ok := src.first(r.name, r.digits, now, r.parse); ok {
			return d, true
		}
	}
	for i := range resetGroups {
		if d, ok := resetGroups[i].hint(src, now); ok {
			return d, true
		}
	}
	if !src.isText {
		return 0, false
	}
	for _, r := range textRules {
		if d, ok := src.first(r.name, r.digits, now, r.parse); ok {
			return d, true
		}
	}
	if d, ok := phraseHint(src.text, &src.bytes); ok {
		return d, true
	}
	if src.bytes.mayHold("reset") { // what timeOfDayHint looks for first
		if d, ok := timeOfDayHint(src.text, now); ok {
			return d, true
		}
	}
	return epochSuffixHint(src.text, now)
}

// first returns the first value given for name that parse accepts: the
// header of that name (in any case; among spellings of one name, the
// lower-case one, else the first by byte order), or in text each
// "name: value" in turn.
func (s *source) first(name string, digits bool, now time.Time, parse func(string, time.Time) (time.Duration, bool)) (time.Duration, bool) {
	if !s.isText {
		v, ok := s.header(name)
		if !ok {
			return 0, false
		}
		return parse(trimSpace(v), now)
	}
	if !s.bytes.mayHold(name) {
		return 0, false
	}
	text := s.text
	for at := 0; ; {
		i := indexFold(text[at:], []byte(name))
		if i < 0 {
			return 0, false
		}
		start := at + i + len(name)
		at = at + i + 1
		j := skipQuote(text, start)
		j = skipSpace(text, j)
		if j >= len(text) || (text[j] != ':' && text[j] != '=') {
			continue
		}
		j = skipQuote(text, skipSpace(text, j+1))
		k := scanValue(text, j, digits)
		if k == j || (!digits && k-j > maxHintValue) {
			continue
		}
		if d, ok := parse(text[j:k], now); ok {
			return d, true
		}
	}
}

// header is the value of the header name (lower case), matched without
// regard to case: the lower-case spelling when present, else the first
// spelling by byte order, so that the answer does not depend on the map's
// order.
func (s *source) header(name string) (string, bool) {
	if v, ok := s.headers[name]; ok {
		return v, true
	}
	var key, value string
	found := false
	for k, v := range s.headers {
		if len(k) == len(name) && hasLitAt(k, 0, []byte(name)) && (!found || k < key) {
			key, value, found = k, v, true
		}
	}
	return value, found
}

// hint is the group's reset: the latest of the limits whose remaining
// count is 0, or, when none is, the latest of all that parse.
func (g *resetGroup) hint(src *source, now time.Time) (time.Duration, bool) {
	var latest, latestExhausted time.Duration
	found, exhausted := false, false
	for i, name := range g.reset {
		d, ok := src.first(name, false, now, g.parse)
		if !ok {
			continue
		}
		if !found || d > latest {
			latest = d
		}
		found = true
		left, known := src.first(g.remaining[i], true, now, parseLeft)
		if known && left == 0 && (!exhausted || d > latestExhausted) {
			latestExhausted, exhausted = d, true
		}
	}
	if exhausted {
		return latestExhausted, true
	}
	return latest, found
}

// parseLeft reads a remaining count, returned as a Duration only so that
// it goes through source.first: 0 means exhausted, anything else not.
func parseLeft(v string, _ time.Time) (time.Duration, bool) {
	n, ok := parseUint(v)
	if n > 0 {
		return 1, ok
	}
	return 0, ok
}

// indexFold is indexLower for the hint readers, which call it again after
// each occurrence: the index of the lowered literal lit in s, folding s's
// ASCII letters, or -1, in time proportional to the index (or to len(s)
// when there is none), so that a text holding a name many times costs
// linear time overall. It looks for lit's first byte, in either case, in
// windows that double while they hold none.
func indexFold(s string, lit []byte) int {
	first := lit[0]
	upper := first
	if first >= 'a' && first <= 'z' {
		upper = first - 'a' + 'A'
	}
	last := len(s) - len(lit) // the last start that fits
	for i, w := 0, 64; i <= last; {
		end := min(i+w, last+1)
		win := s[i:end]
		j := strings.IndexByte(win, first)
		if upper != first {
			if k := strings.IndexByte(win, upper); k >= 0 && (j < 0 || k < j) {
				j = k
			}
		}
		if j < 0 {
			i, w = end, min(2*w, 1<<20)
			continue
		}
		if hasLitAt(s, i+j, lit) {
			return i + j
		}
		i, w = i+j+1, 64
	}
	return -1
}

// skipQuote skips a quote that closes a name or opens a value: one of " '
// `, after up to two backslashes (a body printed inside a string).
func skipQuote(s string, i int) int {
	j := i
	for k := 0; k < 2 && j < len(s) && s[j] == '\\'; k++ {
		j++
	}
	if j < len(s) && (s[j] == '"' || s[j] == '\'' || s[j] == '`') {
		return j + 1
	}
	return i
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
			return until(t, now)
		}
	}
	return 0, false
}

// parseResetTime reads an RFC 3339 time (Anthropic's reset headers).
func parseResetTime(v string, now time.Time) (time.Duration, bool) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, false
	}
	return until(t, now)
}

// until is the time from now until t: 0 when t is past, not ok when it is
// more than maxAhead away.
func until(t, now time.Time) (time.Duration, bool) {
	d := t.Sub(now)
	if d > maxAhead {
		return 0, false
	}
	return max(d, 0), true
}

func parseResetMillis(v string, now time.Time) (time.Duration, bool) {
	n, ok := parseUint(v)
	if !ok {
		return 0, false
	}
	if n > 1e12 {
		return untilEpoch(n, time.Millisecond, now)
	}
	return saturate(n, time.Millisecond), true
}

func parseResetSeconds(v string, now time.Time) (time.Duration, bool) {
	n, ok := parseUint(v)
	if !ok {
		return 0, false
	}
	if n > 1e9 {
		return untilEpoch(n, time.Second, now)
	}
	return saturate(n, time.Second), true
}

// parseSeconds reads a number of seconds, whatever its size.
func parseSeconds(v string, _ time.Time) (time.Duration, bool) {
	n, ok := parseUint(v)
	return saturate(n, time.Second), ok
}

// parseEpochSeconds reads an epoch in seconds, whatever its size.
func parseEpochSeconds(v string, now time.Time) (time.Duration, bool) {
	n, ok := parseUint(v)
	if !ok {
		return 0, false
	}
	return untilEpoch(n, time.Second, now)
}

// untilEpoch is the time from now until epoch n in units of unit (a
// second or a millisecond): 0 when it is past, not ok when it is more than
// maxAhead away.
func untilEpoch(n uint64, unit time.Duration, now time.Time) (time.Duration, bool) {
	if n > 1<<62 {
		return 0, false // past any clock's year 292277026596
	}
	if unit == time.Millisecond {
		return until(time.UnixMilli(int64(n)), now)
	}
	return until(time.Unix(int64(n), 0), now)
}

// parseStrictSpan reads a whole value that is a duration without spaces:
// "6m0s", "1s", "20ms", "1h2m3.5s", Google's "1.5s".
func parseStrictSpan(v string, _ time.Time) (time.Duration, bool) {
	d, end, ok := parseSpan(v, 0, false)
	return d, ok && end == len(v)
}

// spanUnit is a unit word of a duration.
type spanUnit struct {
	word  string
	unit  time.Duration
	loose bool // a word only prose uses, not a Go or protobuf duration
}

// spanUnits are the unit words, longer ones before their prefixes.
var spanUnits = [...]spanUnit{
	{"milliseconds", time.Millisecond, true}, {"millisecond", time.Millisecond, true}, {"ms", time.Millisecond, false},
	{"seconds", time.Second, true}, {"second", time.Second, true}, {"secs", time.Second, true}, {"sec", time.Second, true},
	{"minutes", time.Minute, true}, {"minute", time.Minute, true}, {"mins", time.Minute, true}, {"min", time.Minute, true},
	{"hours", time.Hour, true}, {"hour", time.Hour, true}, {"hrs", time.Hour, true}, {"hr", time.Hour, true},
	{"days", 24 * time.Hour, true}, {"day", 24 * time.Hour, true},
	{"s", time.Second, false}, {"m", time.Minute, false}, {"h", time.Hour, false}, {"d", 24 * time.Hour, true},
}

// parseSpan reads a duration starting at s[i]: one or more parts, each a
// number (fractions allowed) and a unit. Loose, as prose writes it: unit
// words, spaces between number and unit and between parts, commas and
// "and" between parts ("2 hours, 3 minutes and 4 seconds"); otherwise
// only ms, s, m and h, with nothing between. It returns the duration,
// saturated at the largest Duration, and where it ends; ok is false when
// no part is there.
func parseSpan(s string, i int, loose bool) (d time.Duration, end int, ok bool) {
	end = i
	for {
		j := end
		if loose && ok {
			j = skipSpace(s, j)
			if j < len(s) && s[j] == ',' {
				j = skipSpace(s, j+1)
			}
			if hasLitAt(s, j, []byte("and")) && j+3 < len(s) && isSpaceByte(s[j+3]) {
				j = skipSpace(s, j+3)
			}
		}
		whole, frac, k := scanNumber(s, j)
		if k == j {
			return d, end, ok
		}
		if loose {
			k = skipSpace(s, k)
		}
		u, n := matchUnit(s, k, loose)
		if n == 0 {
			return d, end, ok
		}
		d = addSat(d, addSat(saturate(whole, u), time.Duration(frac*float64(u))))
		end, ok = k+n, true
	}
}

// scanNumber reads digits with an optional fraction at s[i]: the whole
// part (saturated), the fraction in [0, 1), and where the number ends (i
// when there is none).
func scanNumber(s string, i int) (whole uint64, frac float64, end int) {
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j == i {
		return 0, 0, i
	}
	whole, _ = parseUint(s[i:j])
	if j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
		k := j + 1
		scale := 0.1
		for k < len(s) && isDigit(s[k]) {
			frac += float64(s[k]-'0') * scale
			scale /= 10
			k++
		}
		j = k
	}
	return whole, min(frac, 0.999999999), j
}

// matchUnit returns the unit whose word starts at s[i] and is not followed
// by a letter, and the word's length; 0 when none.
func matchUnit(s string, i int, loose bool) (time.Duration, int) {
	for _, u := range spanUnits {
		if u.loose && !loose {
			continue
		}
		n := len(u.word)
		if hasLitAt(s, i, []byte(u.word)) && (i+n == len(s) || !isLetter(s[i+n])) {
			return u.unit, n
		}
	}
	return 0, 0
}

// addSat is a+b for non-negative durations, saturating.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func isSpaceByte(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// phrases lead a duration in prose.
var phrases = [...]string{"try again in ", "retry in ", "resets in ", "reset in ", "reset after "}

// phraseHint reads form 9 of RetryAfter: a phrase, then a duration, "~"
// or "about" allowed between.
func phraseHint(text string, set *byteSet) (time.Duration, bool) {
	for _, p := range phrases {
		if !set.mayHold(p) {
			continue
		}
		for at := 0; ; {
			i := indexFold(text[at:], []byte(p))
			if i < 0 {
				break
			}
			j := skipSpace(text, at+i+len(p))
			at += i + 1
			if j < len(text) && text[j] == '~' {
				j = skipSpace(text, j+1)
			} else if hasLitAt(text, j, []byte("about ")) {
				j = skipSpace(text, j+len("about "))
			}
			if d, _, ok := parseSpan(text, j, true); ok {
				return d, true
			}
		}
	}
	return 0, false
}

// timeOfDayHint reads form 10 of RetryAfter: "reset" or "resets", "at"
// or not, a time of day, and a zone in parentheses or not.
func timeOfDayHint(text string, now time.Time) (time.Duration, bool) {
	for at := 0; ; {
		i := indexFold(text[at:], []byte("reset"))
		if i < 0 {
			return 0, false
		}
		i += at
		j := i + len("reset")
		at = i + 1
		if i > 0 && isLetter(text[i-1]) {
			continue // "preset"
		}
		if j < len(text) && (text[j] == 's' || text[j] == 'S') {
			j++
		}
		if j >= len(text) || !isSpaceByte(text[j]) {
			continue
		}
		j = skipSpace(text, j)
		if hasLitAt(text, j, []byte("at")) && j+2 < len(text) && isSpaceByte(text[j+2]) {
			j = skipSpace(text, j+2)
		}
		hour, minute, k, ok := scanClock(text, j)
		if !ok {
			continue
		}
		loc := time.UTC
		if z := skipSpace(text, k); z < len(text) && text[z] == '(' {
			if name, ok := zoneName(text, z+1); ok {
				if loc, ok = loadZone(name); !ok {
					continue
				}
			}
		}
		local := now.In(loc)
		next := clockTime(local, 0, hour, minute, loc)
		if !next.After(now) {
			next = clockTime(local, 1, hour, minute, loc)
		}
		return max(next.Sub(now), 0), true
	}
}

// clockTime is the instant the clock of loc reads hour:minute on the day
// days after day's. On a day whose clocks skip that time (a change to
// summer time: 2:30 does not exist in New York on 2026-03-08), it is the
// instant they skip it, the change itself (3:00 EDT): time.Date would
// normalize it to an hour before or after, and an hour before may be in
// the past, which read as tomorrow's 2:30, a day too late.
func clockTime(day time.Time, days, hour, minute int, loc *time.Location) time.Time {
	t := time.Date(day.Year(), day.Month(), day.Day()+days, hour, minute, 0, 0, loc)
	// The wall clocks asked for and got, compared as if in UTC (a change
	// at midnight moves the day too).
	want := time.Date(day.Year(), day.Month(), day.Day()+days, hour, minute, 0, 0, time.UTC)
	got := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), 0, 0, time.UTC)
	start, end := t.ZoneBounds()
	switch {
	case got.Equal(want):
		return t
	case got.Before(want) && !end.IsZero():
		return end // t is before the change, in the zone it ends
	case got.After(want) && !start.IsZero():
		return start
	}
	return t
}

// scanClock reads a time of day at s[i]: "3pm", "3 PM", "3:15pm", "12am",
// or "15:00" on a 24-hour clock. It returns the hour, the minute and where
// the time ends.
func scanClock(s string, i int) (hour, minute, end int, ok bool) {
	j := i
	for j < len(s) && j-i < 3 && isDigit(s[j]) {
		j++
	}
	if j == i || j-i > 2 {
		return 0, 0, 0, false
	}
	hour, _ = strconv.Atoi(s[i:j])
	colon := false
	if j+2 < len(s) && s[j] == ':' && isDigit(s[j+1]) && isDigit(s[j+2]) && (j+3 == len(s) || !isDigit(s[j+3])) {
		minute = int(s[j+1]-'0')*10 + int(s[j+2]-'0')
		j, colon = j+3, true
	} else if j < len(s) && isDigit(s[j]) {
		return 0, 0, 0, false
	}
	if minute > 59 {
		return 0, 0, 0, false
	}
	k := j
	for k < len(s) && s[k] == ' ' {
		k++
	}
	if k+1 < len(s) && (s[k]|0x20 == 'a' || s[k]|0x20 == 'p') && s[k+1]|0x20 == 'm' && (k+2 == len(s) || !isLetter(s[k+2])) {
		if hour < 1 || hour > 12 {
			return 0, 0, 0, false
		}
		hour %= 12
		if s[k]|0x20 == 'p' {
			hour += 12
		}
		return hour, minute, k + 2, true
	}
	if !colon || hour > 23 || (j < len(s) && isLetter(s[j])) {
		return 0, 0, 0, false
	}
	return hour, minute, j, true
}

// zoneName reads an IANA zone name at s[i], closed by ")": letters,
// digits, "_", "+", "-" and "/", at most 64 bytes.
func zoneName(s string, i int) (string, bool) {
	j := i
	for j < len(s) && j-i <= 64 {
		c := s[j]
		if !(isLetter(c) || isDigit(c) || c == '_' || c == '+' || c == '-' || c == '/') {
			break
		}
		j++
	}
	if j == i || j-i > 64 || j >= len(s) || s[j] != ')' || !isLetter(s[i]) {
		return "", false
	}
	return s[i:j], true
}

// zones caches the time zones loaded by name: only zones that exist, so
// its size is bounded by the system's zone database.
var zones sync.Map // string → *time.Location

// loadZone is time.LoadLocation, cached; false for a zone the system does
// not know.
func loadZone(name string) (*time.Location, bool) {
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), true
	}
	l, err := time.LoadLocation(name)
	if err != nil || strings.EqualFold(name, "local") {
		return nil, false
	}
	zones.Store(strings.Clone(name), l)
	return l, true
}

// epochSuffixHint reads form 11 of RetryAfter: "|" and ten digits, right
// after a non-space character and followed by no digit.
func epochSuffixHint(text string, now time.Time) (time.Duration, bool) {
	for at := 0; ; {
		i := strings.IndexByte(text[at:], '|')
		if i < 0 {
			return 0, false
		}
		i += at
		at = i + 1
		if i == 0 || isSpaceByte(text[i-1]) || text[i-1] == '|' {
			continue
		}
		j := i + 1
		for j < len(text) && isDigit(text[j]) {
			j++
		}
		if j-i-1 != 10 {
			continue
		}
		n, _ := parseUint(text[i+1 : j])
		if d, ok := untilEpoch(n, time.Second, now); ok {
			return d, true
		}
	}
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

// maxHintValue is the longest value a "name: value" hint that is not
// digits may have, in bytes: the longest real one, an HTTP date or an RFC
// 3339 time with nanoseconds, is about 35. A longer value is no hint, and
// is not read past this length, so that a text repeating a name with no
// value between costs linear time, not quadratic.
const maxHintValue = 64

// scanValue returns the end of the value starting at i: \d+ when digits,
// else [^\s,;"'`\\)}\]]+ with JavaScript's \s, read at most
// maxHintValue+1 bytes far.
func scanValue(s string, i int, digits bool) int {
	if !digits && len(s)-i > maxHintValue+1 {
		s = s[:i+maxHintValue+1]
	}
	for i < len(s) {
		if digits {
			if !isDigit(s[i]) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if strings.ContainsRune(",;\"'`\\)}]", r) || isSpace(r) {
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
