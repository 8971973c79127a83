package classify

import (
	"fmt"
	"regexp/syntax"
	"strings"
	"sync"
	"unicode/utf8"
)

// The scanner decides every pattern group of a rule set in one pass over
// the text, without lowering it into a copy and without allocating.
//
// Each pattern is split into alternatives (as jsRegexps does) and each
// alternative expanded into a few fixed sequences of atoms: literals,
// one-character classes, word boundaries, the text's start, \d+, \s* and
// JavaScript's .*, each sequence starting with a literal. All those leading
// literals go into one Aho-Corasick automaton over case-folded bytes; each
// hit is checked against the rest of its sequence in place. A pattern the
// expansion cannot take (another repetition, a sequence without a leading
// literal) makes the package panic at init, so it cannot ship unnoticed.
//
// The regexps (jsRegexps) stay the definition: tests check the scanner
// against them on the corpus, the benchmark page, random texts and a fuzz
// target.

// atomKind is one step of a fixed sequence.
type atomKind uint8

const (
	atomLit      atomKind = iota // lowered bytes
	atomClass                    // one rune in a class (matched lowered)
	atomBoundary                 // \b
	atomBegin                    // ^ (start of text)
	atomDigits                   // \d+, greedy; never followed by a digit atom
	atomStar                     // .* (JavaScript's dot: no line terminator); always followed by a literal
	atomSpaces                   // \s* (JavaScript's \s), greedy; never followed by a space
)

type atom struct {
	kind   atomKind
	lit    []byte
	ranges []rune // pairs, as syntax.Regexp.Rune
}

// entry is one way a group can match: a fixed sequence and the literal it
// starts with.
type entry struct {
	group  uint8
	prefix []byte // lowered; the automaton's key
	seq    []atom // after the prefix
	before []atom // zero-width atoms before the prefix (\b, ^)
	star   bool   // seq holds a .*
	slot   int    // with star: its index in scratch.checkedTo
}

// scanner is the automaton for one rule set.
type scanner struct {
	entries  []entry
	classOf  [256]uint8
	nClasses int
	// delta maps row + class to the next state's row, where a state's row
	// is its number × nClasses. States are numbered so that those with
	// outputs come last: a row at or past outRow has entries to check.
	delta    []uint16
	outRow   int
	outStart []uint32 // state → range in outs
	outs     []uint16 // entry indices
	groups   uint8    // how many groups
	stars    int      // how many entries have a .*
	key      int      // the longest key (0: maxKey)
	longest  int      // the longest prefix, in bytes
}

// groupBits is the set of groups that matched.
type groupBits uint8

// compileScanner builds the scanner for the given groups, in order: bit i
// of the scan result is groups[i].
func compileScanner(groups []group) *scanner {
	var alts []alternative
	for gi, g := range groups {
		for _, p := range patterns {
			if p.Group != g {
				continue
			}
			for _, alt := range alternativesOf(p.Expr) {
				alts = append(alts, alternative{uint8(gi), alt})
			}
		}
	}
	// The longest keys whose table fits, by bisection (a longer key makes a
	// hit rarer but adds states).
	try := func(key int) *scanner {
		sc := &scanner{groups: uint8(len(groups)), key: key}
		for _, a := range alts {
			sc.add(a.group, a.re)
		}
		for i := range sc.entries {
			if sc.entries[i].star {
				sc.entries[i].slot = sc.stars
				sc.stars++
			}
		}
		if !sc.build() {
			return nil
		}
		return sc
	}
	if sc := try(maxKey); sc != nil {
		return sc
	}
	best := try(minKey)
	if best == nil {
		panic(fmt.Sprintf("classify: the scanner's automaton does not fit its table even with %d-byte keys", minKey))
	}
	for lo, hi := minKey, maxKey; hi-lo > 1; { // lo fits, hi does not
		mid := (lo + hi) / 2
		if sc := try(mid); sc != nil {
			best, lo = sc, mid
		} else {
			hi = mid
		}
	}
	return best
}

// alternative is one alternative of a pattern of the group numbered group.
type alternative struct {
	group uint8
	re    *syntax.Regexp
}

// alternativesOf parses a pattern the way jsRegexps does.
func alternativesOf(expr string) []*syntax.Regexp {
	re, err := syntax.Parse(translateJS(expr), syntax.Perl)
	if err != nil {
		panic("classify: pattern " + expr + ": " + err.Error())
	}
	return alternatives(re.Simplify())
}

func (sc *scanner) add(group uint8, alt *syntax.Regexp) {
	seqs, ok := expand(alt, 64)
	if !ok {
		panic("classify: the scanner cannot take the pattern alternative " + alt.String())
	}
	for _, seq := range seqs {
		e, ok := fixedEntry(group, seq, sc.key)
		if !ok {
			panic("classify: the pattern alternative " + alt.String() + " has a sequence without a leading literal")
		}
		sc.entries = append(sc.entries, e)
	}
}

// maxKey and minKey bound the length of the automaton's keys, the leading
// literals' heads: compileScanner takes the longest that lets the table fit
// its 16-bit offsets. Past a dozen bytes a longer key hardly makes a hit
// rarer.
const maxKey, minKey = 16, 6

// fixedEntry turns a sequence into an entry keyed by its leading literal
// (its first key bytes; 0 means maxKey).
func fixedEntry(group uint8, seq []atom, key int) (entry, bool) {
	if key == 0 {
		key = maxKey
	}
	i := 0
	for i < len(seq) && (seq[i].kind == atomBoundary || seq[i].kind == atomBegin) {
		i++
	}
	if i == len(seq) || seq[i].kind != atomLit {
		return entry{}, false
	}
	e := entry{group: group, before: seq[:i], prefix: seq[i].lit, seq: seq[i+1:]}
	if len(e.prefix) > key {
		// The automaton keys on the literal's head; the rest is checked
		// with the sequence, first.
		rest := atom{kind: atomLit, lit: e.prefix[key:]}
		e.prefix = e.prefix[:key]
		e.seq = append([]atom{rest}, e.seq...)
	}
	for _, a := range e.seq {
		e.star = e.star || a.kind == atomStar
	}
	return e, true
}

// expand lists the fixed sequences re matches, or false when re repeats
// anything but \d+ or would expand into more than limit sequences.
func expand(re *syntax.Regexp, limit int) ([][]atom, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return [][]atom{nil}, true
	case syntax.OpLiteral:
		return [][]atom{{{kind: atomLit, lit: []byte(string(re.Rune))}}}, true
	case syntax.OpCharClass:
		return [][]atom{{{kind: atomClass, ranges: re.Rune}}}, true
	case syntax.OpWordBoundary:
		return [][]atom{{{kind: atomBoundary}}}, true
	case syntax.OpBeginText:
		return [][]atom{{{kind: atomBegin}}}, true
	case syntax.OpCapture:
		return expand(re.Sub[0], limit)
	case syntax.OpQuest:
		sub, ok := expand(re.Sub[0], limit)
		if !ok || len(sub)+1 > limit {
			return nil, false
		}
		return append(sub, nil), true
	case syntax.OpPlus:
		if isDigitClass(re.Sub[0]) {
			return [][]atom{{{kind: atomDigits}}}, true
		}
		return nil, false
	case syntax.OpStar:
		switch {
		case isJSDot(re.Sub[0]):
			return [][]atom{{{kind: atomStar}}}, true
		case isJSSpace(re.Sub[0]):
			return [][]atom{{{kind: atomSpaces}}}, true
		}
		return nil, false
	case syntax.OpAlternate:
		var out [][]atom
		for _, sub := range re.Sub {
			s, ok := expand(sub, limit)
			if !ok || len(out)+len(s) > limit {
				return nil, false
			}
			out = append(out, s...)
		}
		return out, true
	case syntax.OpConcat:
		out := [][]atom{nil}
		for _, sub := range re.Sub {
			s, ok := expand(sub, limit)
			if !ok || len(out)*len(s) > limit {
				return nil, false
			}
			var next [][]atom
			for _, head := range out {
				for _, tail := range s {
					next = append(next, joinAtoms(head, tail))
				}
			}
			out = next
		}
		for i, seq := range out {
			norm, ok := normalize(seq)
			if !ok {
				return nil, false
			}
			out[i] = norm
		}
		return out, true
	}
	return nil, false
}

// joinAtoms concatenates two sequences, merging adjacent literals.
func joinAtoms(a, b []atom) []atom {
	out := make([]atom, 0, len(a)+len(b))
	out = append(out, a...)
	for _, x := range b {
		if n := len(out); n > 0 && x.kind == atomLit && out[n-1].kind == atomLit {
			out[n-1] = atom{kind: atomLit, lit: append(append([]byte(nil), out[n-1].lit...), x.lit...)}
			continue
		}
		out = append(out, x)
	}
	return out
}

// normalize checks that a sequence can be matched without general
// backtracking, merging what can be merged: \d+ and \s* are greedy, which
// is exact only when what follows cannot continue them; .* must be
// followed by a literal (the matcher searches for it), and at the end it
// matches the empty string, so it is dropped there.
func normalize(seq []atom) ([]atom, bool) {
	out := seq[:0:0]
	for i, a := range seq {
		var next *atom
		if i+1 < len(seq) {
			next = &seq[i+1]
		}
		switch a.kind {
		case atomDigits:
			if next != nil && mayStartWithDigit(*next) {
				return nil, false
			}
		case atomSpaces:
			if next != nil && next.kind == atomSpaces {
				continue // \s*\s* is \s*
			}
			if next != nil && mayStartWithSpace(*next) {
				return nil, false
			}
		case atomStar:
			if next == nil {
				continue
			}
			if next.kind != atomLit {
				return nil, false
			}
		}
		out = append(out, a)
	}
	return out, true
}

func mayStartWithSpace(a atom) bool {
	switch a.kind {
	case atomLit:
		r, _ := utf8.DecodeRune(a.lit)
		return isSpace(r)
	case atomClass:
		for _, r := range []rune{' ', '\t', '\n', '\r', 0xa0} {
			if inRanges(r, a.ranges) {
				return true
			}
		}
		return false
	case atomSpaces, atomStar:
		return true
	}
	return false
}

// isJSDot reports whether re is the class JavaScript's "." stands for: every
// rune but the line terminators.
func isJSDot(re *syntax.Regexp) bool {
	if re.Op != syntax.OpCharClass {
		return false
	}
	for _, r := range []rune{'\n', '\r', 0x2028, 0x2029} {
		if inRanges(r, re.Rune) {
			return false
		}
	}
	for _, r := range []rune{0, 'a', ' ', 0x2027, 0x202a, utf8.RuneError, 0x10000, unicodeMax} {
		if !inRanges(r, re.Rune) {
			return false
		}
	}
	return true
}

const unicodeMax = 0x10FFFF

// isJSSpace reports whether re is the class of JavaScript's \s.
func isJSSpace(re *syntax.Regexp) bool {
	if re.Op != syntax.OpCharClass {
		return false
	}
	for r := rune(0); r <= 0x3000; r++ {
		if inRanges(r, re.Rune) != isSpace(r) {
			return false
		}
	}
	return !inRanges(0xfeff-1, re.Rune) && inRanges(0xfeff, re.Rune)
}

func isDigitClass(re *syntax.Regexp) bool {
	return re.Op == syntax.OpCharClass && len(re.Rune) == 2 && re.Rune[0] == '0' && re.Rune[1] == '9'
}

func mayStartWithDigit(a atom) bool {
	switch a.kind {
	case atomDigits:
		return true
	case atomLit:
		return a.lit[0] >= '0' && a.lit[0] <= '9'
	case atomClass:
		for r := '0'; r <= '9'; r++ {
			if inRanges(r, a.ranges) {
				return true
			}
		}
		return false
	case atomStar, atomSpaces:
		return true
	}
	return false
}

func inRanges(r rune, ranges []rune) bool {
	for i := 0; i+1 < len(ranges); i += 2 {
		if r >= ranges[i] && r <= ranges[i+1] {
			return true
		}
	}
	return false
}

// build makes the Aho-Corasick automaton of the entries' prefixes.
// build makes the automaton; it reports false when the table does not fit
// 16-bit offsets.
func (sc *scanner) build() bool {
	// Byte classes: every byte that appears in a prefix (lowered) gets its
	// own; upper-case letters share their lower case's; the rest is 0.
	next := uint8(1)
	for _, e := range sc.entries {
		for _, b := range e.prefix {
			if sc.classOf[b] == 0 {
				sc.classOf[b] = next
				next++
			}
		}
	}
	for c := 'A'; c <= 'Z'; c++ {
		sc.classOf[c] = sc.classOf[c+'a'-'A']
	}
	sc.nClasses = int(next)
	n := sc.nClasses
	for _, e := range sc.entries {
		sc.longest = max(sc.longest, len(e.prefix))
	}

	// The trie.
	trie := []map[uint8]int{{}}
	outs := [][]uint16{nil}
	for i, e := range sc.entries {
		s := 0
		for _, b := range e.prefix {
			c := sc.classOf[b]
			t, ok := trie[s][c]
			if !ok {
				t = len(trie)
				trie = append(trie, map[uint8]int{})
				outs = append(outs, nil)
				trie[s][c] = t
			}
			s = t
		}
		outs[s] = append(outs[s], uint16(i))
	}
	// Failure links, breadth first, and the full transition table, whose
	// offsets (state × classes) must fit 16 bits.
	states := len(trie)
	if states*n > 1<<16 {
		return false
	}
	sc.delta = make([]uint16, states*n)
	fail := make([]int, states)
	queue := []int{}
	for c := range n {
		if t, ok := trie[0][uint8(c)]; ok {
			sc.delta[c] = uint16(t)
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		outs[s] = append(outs[s], outs[fail[s]]...)
		for c := range n {
			if t, ok := trie[s][uint8(c)]; ok {
				fail[t] = int(sc.delta[fail[s]*n+c])
				sc.delta[s*n+c] = uint16(t)
				queue = append(queue, t)
			} else {
				sc.delta[s*n+c] = sc.delta[fail[s]*n+c]
			}
		}
	}
	// Renumber: states without outputs first, the root staying 0.
	order := make([]int, 0, states) // new number → old
	for s := range states {
		if len(outs[s]) == 0 {
			order = append(order, s)
		}
	}
	quiet := len(order)
	for s := range states {
		if len(outs[s]) > 0 {
			order = append(order, s)
		}
	}
	renum := make([]int, states)
	for newS, oldS := range order {
		renum[oldS] = newS
	}
	if renum[0] != 0 || states*n > 1<<16 {
		return false
	}
	delta := make([]uint16, states*n)
	for oldS := range states {
		for c := range n {
			delta[renum[oldS]*n+c] = uint16(renum[int(sc.delta[oldS*n+c])] * n)
		}
	}
	sc.delta = delta
	sc.outRow = quiet * n
	sc.outStart = make([]uint32, states+1)
	for newS, oldS := range order {
		sc.outStart[newS] = uint32(len(sc.outs))
		sc.outs = append(sc.outs, outs[oldS]...)
	}
	sc.outStart[states] = uint32(len(sc.outs))
	return true
}

// scratch is the per-call memory of a scan: for each cursor and each entry
// with a .*, the offset before which the text is known to hold no match of
// it (a cursor's entries start at its checked offset).
type scratch struct {
	checkedTo []int
}

var scratchPool = sync.Pool{New: func() any { return &scratch{} }}

// splitAt is the shortest text scanned by two cursors at once. Each step of
// the automaton waits for the one before it (the next row is a load that
// depends on the last); two cursors over the two halves of a text make two
// independent chains that the processor runs side by side.
const splitAt = 128

// scanning is one scan's state, shared by its cursors.
type scanning struct {
	sc    *scanner
	text  string
	found groupBits
	all   groupBits
	sp    *scratch // taken from the pool by the first .* entry
}

// cursor is one pass of the automaton over a part of the text.
type cursor struct {
	checked int // this cursor's offset in scratch.checkedTo
	// The line around the last hit: [lineFrom, lineTo) holds no terminator.
	lineFrom, lineTo int
}

func (st *scanning) lineOf(c *cursor, at int) int {
	if at < c.lineFrom || at > c.lineTo {
		c.lineFrom, c.lineTo = at, lineEnd(st.text, at)
	}
	return c.lineTo
}

func (st *scanning) checkedTo() []int {
	if st.sp == nil {
		need := 2 * st.sc.stars
		st.sp = scratchPool.Get().(*scratch)
		if len(st.sp.checkedTo) < need {
			st.sp.checkedTo = make([]int, need)
		}
		clear(st.sp.checkedTo[:need])
	}
	return st.sp.checkedTo
}

// hits checks the entries of the automaton's row whose literals end at pos,
// as seen by cursor c, and reports whether every group has matched.
func (st *scanning) hits(c *cursor, row, pos int) bool {
	sc, text := st.sc, st.text
	state := row / sc.nClasses
	lo, hi := sc.outStart[state], sc.outStart[state+1]
	for _, ei := range sc.outs[lo:hi] {
		e := &sc.entries[ei]
		bit := groupBits(1) << e.group
		if st.found&bit != 0 {
			continue
		}
		start := pos + 1 - len(e.prefix)
		if len(e.seq) > 0 && e.seq[0].kind == atomLit && !hasLitAt(text, pos+1, e.seq[0].lit) {
			continue // the literal goes on past the automaton's key, and not here
		}
		if !e.star {
			if matchFixed(e, text, start, len(text)) == matched {
				st.found |= bit
			}
		} else {
			checked := st.checkedTo()[c.checked+e.slot:]
			if start < checked[0] {
				continue // this line is known to hold no match
			}
			end := st.lineOf(c, start)
			switch matchFixed(e, text, start, end) {
			case matched:
				st.found |= bit
			case exhausted:
				checked[0] = end
			}
		}
		if st.found == st.all {
			return true
		}
	}
	return false
}

// scan returns the groups text matches.
//
// A long text is read by two cursors in step: one from the start to the
// middle, one from just before the middle (by the longest literal but one,
// so that it sees every literal that ends at or after the middle) to the
// end. Every literal occurrence is seen by one of them, each cursor moves
// forward only (what the .* entries' bookkeeping needs), and the groups
// found do not depend on the order of the hits.
func (sc *scanner) scan(text string) groupBits {
	if text == "" {
		return 0
	}
	st := scanning{sc: sc, text: text, all: groupBits(1)<<sc.groups - 1}
	defer func() {
		if st.sp != nil {
			scratchPool.Put(st.sp)
		}
	}()
	delta, classOf, outRow := sc.delta, &sc.classOf, sc.outRow
	first := cursor{lineTo: -1}
	c, row, pos := &first, 0, 0
	if len(text) >= max(splitAt, 2*sc.longest) {
		second := cursor{checked: sc.stars, lineTo: -1}
		mid := len(text) / 2
		row2, pos2 := 0, mid-(sc.longest-1)
		for ; pos < mid; pos, pos2 = pos+1, pos2+1 {
			row = int(delta[row+int(classOf[text[pos]])])
			row2 = int(delta[row2+int(classOf[text[pos2]])])
			if row >= outRow && st.hits(&first, row, pos) {
				return st.found
			}
			if row2 >= outRow && st.hits(&second, row2, pos2) {
				return st.found
			}
		}
		c, row, pos = &second, row2, pos2
	}
	for ; pos < len(text); pos++ {
		row = int(delta[row+int(classOf[text[pos]])])
		if row >= outRow && st.hits(c, row, pos) {
			break
		}
	}
	return st.found
}

// outcome of matching a sequence from one position.
type outcome uint8

const (
	failed    outcome = iota // no match from here
	matched                  // a match
	exhausted                // no match from here, nor from any later start on this line
)

// matchFixed checks a fixed entry whose prefix starts at start; end is the
// end of start's line.
func matchFixed(e *entry, text string, start, end int) outcome {
	for _, a := range e.before {
		if !zeroWidth(a.kind, text, start) {
			return failed
		}
	}
	return matchSeq(e.seq, text, start+len(e.prefix), end)
}

func zeroWidth(k atomKind, text string, at int) bool {
	if k == atomBegin {
		return at == 0
	}
	before := at > 0 && isWordByte(text[at-1])
	after := at < len(text) && isWordByte(text[at])
	return before != after
}

// matchSeq matches seq at pos. A .* searches each occurrence of the
// literal after it, up to the end of the line; when every occurrence fails
// because a later .* found nothing, no later start on the line can match
// either (it would search a part of the same line), which the result says.
func matchSeq(seq []atom, text string, pos, end int) outcome {
	for i, a := range seq {
		switch a.kind {
		case atomLit:
			if !hasLitAt(text, pos, a.lit) {
				return failed
			}
			pos += len(a.lit)
		case atomClass:
			if pos >= len(text) {
				return failed
			}
			r, size := utf8.DecodeRuneInString(text[pos:])
			if r < utf8.RuneSelf {
				r = rune(toLower(byte(r)))
			}
			if !inRanges(r, a.ranges) {
				return failed
			}
			pos += size
		case atomDigits:
			start := pos
			for pos < len(text) && isDigit(text[pos]) {
				pos++
			}
			if pos == start {
				return failed
			}
		case atomSpaces:
			for pos < len(text) {
				r, size := utf8.DecodeRuneInString(text[pos:])
				if !isSpace(r) {
					break
				}
				pos += size
			}
		case atomBoundary, atomBegin:
			if !zeroWidth(a.kind, text, pos) {
				return failed
			}
		case atomStar:
			if pos > end {
				// A \s* before crossed into a later line.
				end = lineEnd(text, pos)
			}
			lit, rest := seq[i+1].lit, seq[i+2:]
			for q := pos; ; {
				k := indexLower(text[q:end], lit)
				if k < 0 {
					return exhausted
				}
				switch matchSeq(rest, text, q+k+len(lit), end) {
				case matched:
					return matched
				case exhausted:
					return exhausted
				}
				q += k + 1
			}
		}
	}
	return matched
}

// hasLitAt reports whether text holds the lowered literal lit at pos.
func hasLitAt(text string, pos int, lit []byte) bool {
	if len(text)-pos < len(lit) {
		return false
	}
	for j, b := range lit {
		if toLower(text[pos+j]) != b {
			return false
		}
	}
	return true
}

// indexLower is the index of the lowered literal lit in s, folding s's
// ASCII letters, or -1. It jumps between occurrences of lit's first byte
// (in either case) with IndexByte, remembering where the next occurrence of
// each case is so that no part of s is searched twice.
func indexLower(s string, lit []byte) int {
	first := lit[0]
	upper := first
	if first >= 'a' && first <= 'z' {
		upper = first - 'a' + 'A'
	}
	last := len(s) - len(lit) // the last start that fits
	nextLower, nextUpper := -1, -1
	if upper == first {
		nextUpper = len(s) // never
	}
	for i := 0; i <= last; {
		if nextLower < i {
			nextLower = indexFrom(s, first, i)
		}
		if nextUpper < i {
			nextUpper = indexFrom(s, upper, i)
		}
		i = min(nextLower, nextUpper)
		if i > last {
			return -1
		}
		if hasLitAt(s, i, lit) {
			return i
		}
		i++
	}
	return -1
}

// indexFrom is the index of c in s at or after from, or len(s).
func indexFrom(s string, c byte, from int) int {
	if k := strings.IndexByte(s[from:], c); k >= 0 {
		return from + k
	}
	return len(s)
}

// lineEnd is the offset of the first line terminator at or after pos (\n,
// \r, U+2028, U+2029), or len(text).
func lineEnd(text string, pos int) int {
	end := len(text)
	rest := text[pos:]
	if k := strings.IndexByte(rest, '\n'); k >= 0 {
		end = pos + k
		rest = text[pos:end]
	}
	if k := strings.IndexByte(rest, '\r'); k >= 0 {
		end = pos + k
		rest = text[pos:end]
	}
	for off := 0; ; {
		k := strings.IndexByte(rest[off:], 0xE2)
		if k < 0 {
			return end
		}
		i := pos + off + k
		if i+2 < len(text) && text[i+1] == 0x80 && (text[i+2] == 0xA8 || text[i+2] == 0xA9) {
			return i
		}
		off += k + 1
	}
}

func isWordByte(c byte) bool {
	return c == '_' || isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'z')
}
