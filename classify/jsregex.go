package classify

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The rules are written in the syntax of the reference's JavaScript regular
// expressions with the i flag and without the u flag. Go's regexp differs
// from that in three ways that change answers, and jsRegexp translates each:
//
//   - case: JavaScript's i flag (without u) folds ASCII letters only where it
//     matters here ("ſ" never matches "s", the Kelvin sign never matches "k"),
//     while Go's (?i) folds by Unicode. The translated pattern is all lower
//     case and is matched against text whose ASCII letters (and only those)
//     were lowered, which is exactly the reference's folding.
//   - dot: JavaScript's "." excludes \n, \r, U+2028 and U+2029 and stands for
//     one UTF-16 code unit, so ".?" never spans a character outside the Basic
//     Multilingual Plane. "." becomes a class that excludes those, and the
//     one under "?" also excludes U+10000 and above.
//   - \s: JavaScript's includes \v and the Unicode spaces; Go's does not.
//
// Only the syntax the rules use is supported: literals (outside ASCII only
// characters without case, such as CJK), ".", "\d", "\s",
// "\b", escaped punctuation, groups, alternation, classes (negated or not)
// without ranges of letters, the anchor ^, and the quantifiers ?, *, +. Anything else panics at init, so a
// rule the translation does not understand cannot ship.
const (
	jsDot      = `[^\n\r\x{2028}\x{2029}]`
	jsDotBMP   = `[^\n\r\x{2028}\x{2029}\x{10000}-\x{10FFFF}]`
	jsSpace    = `[\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}]`
	jsSpaceSet = `\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`
)

// jsRegexps compiles a case-insensitive JavaScript pattern to Go regexps
// that, run on the text with its ASCII letters lowered, match when the pattern matches text: one
// regexp per alternative when the pattern is an alternation, or starts with
// one, so that each can skip ahead to its literal prefix instead of stepping
// an automaton over every byte.
func jsRegexps(src string) []*regexp.Regexp {
	re, err := syntax.Parse(translateJS(src), syntax.Perl)
	if err != nil {
		panic(fmt.Sprintf("classify: pattern %q: %v", src, err))
	}
	var out []*regexp.Regexp
	for _, alt := range alternatives(re.Simplify()) {
		out = append(out, regexp.MustCompile(alt.String()))
	}
	return out
}

// alternatives splits re into expressions whose union is re: the branches
// of a top-level alternation, and the distribution of a concatenation over
// the alternation it starts with, recursively.
func alternatives(re *syntax.Regexp) []*syntax.Regexp {
	switch re.Op {
	case syntax.OpAlternate:
		var out []*syntax.Regexp
		for _, sub := range re.Sub {
			out = append(out, alternatives(sub)...)
		}
		return out
	case syntax.OpCapture:
		return alternatives(re.Sub[0])
	case syntax.OpConcat:
		if len(re.Sub) == 0 {
			return []*syntax.Regexp{re}
		}
		heads := alternatives(re.Sub[0])
		if len(heads) == 1 {
			return []*syntax.Regexp{re}
		}
		out := make([]*syntax.Regexp, len(heads))
		for i, h := range heads {
			out[i] = &syntax.Regexp{Op: syntax.OpConcat, Sub: append([]*syntax.Regexp{h}, re.Sub[1:]...)}
		}
		return out
	case syntax.OpLiteral:
		// A literal alternation's branches may have been factored into a
		// char class followed by literals; nothing to split.
	}
	return []*syntax.Regexp{re}
}

func translateJS(src string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\\':
			if i+1 >= len(src) {
				panic(fmt.Sprintf("classify: pattern %q ends in a backslash", src))
			}
			i++
			switch e := src[i]; e {
			case 's':
				if inClass {
					b.WriteString(jsSpaceSet)
				} else {
					b.WriteString(jsSpace)
				}
			case 'd', 'b':
				b.WriteByte('\\')
				b.WriteByte(e)
			default:
				if isLetter(e) || e >= '0' && e <= '9' {
					panic(fmt.Sprintf("classify: pattern %q uses unsupported escape \\%c", src, e))
				}
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		case inClass:
			if c == ']' {
				inClass = false
				b.WriteByte(c)
			} else if isLetter(c) {
				if i+1 < len(src) && src[i+1] == '-' {
					panic(fmt.Sprintf("classify: pattern %q has a letter range", src))
				}
				b.WriteByte(lower(c))
			} else {
				b.WriteByte(c)
			}
		case c == '[':
			inClass = true
			b.WriteByte(c)
			if i+1 < len(src) && src[i+1] == '^' {
				i++
				b.WriteByte('^')
			}
		case c == '.':
			if i+1 < len(src) && src[i+1] == '?' {
				b.WriteString(jsDotBMP)
			} else {
				b.WriteString(jsDot)
			}
		case isLetter(c):
			b.WriteByte(lower(c))
		case c >= 0x80 && !inClass:
			// A character outside ASCII, as itself, when it has no case
			// (CJK): JavaScript and Go then match it alike.
			r, size := utf8.DecodeRuneInString(src[i:])
			if r == utf8.RuneError || unicode.SimpleFold(r) != r {
				panic(fmt.Sprintf("classify: pattern %q uses %q, which has case or is not UTF-8", src, r))
			}
			b.WriteString(src[i : i+size])
			i += size - 1
		case c == '{' || c == '}' || c >= 0x80:
			panic(fmt.Sprintf("classify: pattern %q uses unsupported syntax %q", src, c))
		default:
			b.WriteByte(c)
		}
	}
	if inClass {
		panic(fmt.Sprintf("classify: pattern %q has an unclosed class", src))
	}
	return b.String()
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func lower(c byte) byte    { return c | 0x20 }
