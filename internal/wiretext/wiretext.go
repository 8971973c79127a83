// Package wiretext holds the one rule for the text the library writes as
// JSON lines (history files, RPC lines, event logs) and keeps in a
// session's runtime context: every string is valid UTF-8, each byte that
// is not is replaced by U+FFFD (one for each such byte, as encoding/json
// does when it writes a string). Raw JSON (a tool call's arguments, a
// command's id) follows the same rule, and two more that encoding/json
// applies to the strings it writes: a JSON escape of a lone UTF-16
// surrogate (\ud800 without its pair) becomes \ufffd, which is what
// encoding/json decodes it to anyway, and U+2028 and U+2029 are written
// as the escapes \u2028 and \u2029, so that no line holds a character
// JavaScript reads as a line break.
package wiretext

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// String returns s with each byte that is not part of valid UTF-8
// replaced by U+FFFD; s itself when it is valid.
func String(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 8)
	for _, r := range s { // an invalid byte ranges as one utf8.RuneError
		sb.WriteRune(r)
	}
	return sb.String()
}

// Error returns err when its text is valid UTF-8, and otherwise an error
// whose text is String's of err's and which wraps err (errors.Is and
// errors.As see through it). nil stays nil.
func Error(err error) error {
	if err == nil || utf8.ValidString(err.Error()) {
		return err
	}
	return &validError{text: String(err.Error()), err: err}
}

type validError struct {
	text string
	err  error
}

func (e *validError) Error() string { return e.text }
func (e *validError) Unwrap() error { return e.err }

// JSON returns the JSON text b under the rule: inside its strings, each
// byte that is not part of valid UTF-8 becomes the escape \ufffd, so does
// the escape of a lone surrogate, and U+2028 and U+2029 become their
// escapes. It returns b itself when nothing changes, so valid JSON costs
// one pass and no copy. The value b stands for is the one encoding/json
// decodes from it either way: a string decodes to the same Go string.
// Bytes outside strings are not looked at: b is expected to be valid JSON
// but for the encoding of its strings (what json.Valid accepts), and
// anything else comes back without a panic, and still invalid.
func JSON(b []byte) []byte {
	var out []byte // nil until the first change
	done := 0      // b[:done] is in out, or needs no copy while out is nil
	replace := func(from, to int, with string) {
		if out == nil {
			out = make([]byte, 0, len(b)+len(with))
		}
		out = append(out, b[done:from]...)
		out = append(out, with...)
		done = to
	}
	inString := false
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				inString = !inString
				i++
			case c == '\\' && inString:
				if i+1 < len(b) && b[i+1] == 'u' {
					n := escapeLen(b[i:])
					if n < 0 {
						replace(i, i+6, `\ufffd`)
						n = 6
					}
					i += n
				} else if i+1 < len(b) && b[i+1] < utf8.RuneSelf {
					i += 2
				} else {
					i++ // not JSON: the byte after is looked at as any other
				}
			default:
				i++
			}
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			replace(i, i+1, `\ufffd`)
		case r == '\u2028':
			replace(i, i+n, `\u2028`)
		case r == '\u2029':
			replace(i, i+n, `\u2029`)
		}
		i += n
	}
	if out == nil {
		return b
	}
	return append(out, b[done:]...)
}

// escapeLen returns the length of the \u escape at the start of e: 6, or
// 12 for a surrogate pair, or -1 for a lone surrogate. An escape with
// fewer than four hex digits (not JSON) counts as 2, so the scan moves
// on.
func escapeLen(e []byte) int {
	r, ok := hex4(e, 2)
	switch {
	case !ok:
		return 2
	case !utf16.IsSurrogate(r):
		return 6
	case r < 0xdc00 && len(e) >= 12 && e[6] == '\\' && e[7] == 'u':
		if r2, ok := hex4(e, 8); ok && r2 >= 0xdc00 && r2 < 0xe000 {
			return 12
		}
	}
	return -1
}

// hex4 reads the four hex digits of e at from.
func hex4(e []byte, from int) (rune, bool) {
	if len(e) < from+4 {
		return 0, false
	}
	var r rune
	for _, c := range e[from : from+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
