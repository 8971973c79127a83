package classify

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// The oracle: every group as the plain regexps of its patterns (translated
// from the reference's JavaScript), run on the lowered text. The scanner must
// give exactly its answers.

func lowerText(s string) []byte {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}

// oracle holds each group's regexps, compiled once.
var oracle = func() map[group][]*regexp.Regexp {
	out := map[group][]*regexp.Regexp{}
	for _, p := range patterns {
		out[p.Group] = append(out[p.Group], jsRegexps(p.Expr)...)
	}
	return out
}()

func oracleBits(groups []group, text string) groupBits {
	var bits groupBits
	low := lowerText(text)
	for gi, g := range groups {
		for _, re := range oracle[g] {
			if re.Match(low) {
				bits |= 1 << gi
				break
			}
		}
	}
	return bits
}

var (
	seedGroups     = []group{groupOverflow, groupNotOverflow, groupSeedRetry, groupUsageFlag}
	extendedGroups = []group{groupOverflow, groupNotOverflow, groupExtendedRetry, groupExtendedUsage, groupExtendedOverflow, groupExtendedFatal, groupExtendedBudget}
)

// fataler is what checkAgainstOracle needs of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func checkAgainstOracle(t fataler, text string) {
	t.Helper()
	if got, want := seedScanner.scan(text), oracleBits(seedGroups, text); got != want {
		t.Fatalf("seed scanner %04b, regexps %04b, for %q", got, want, clipForLog(text))
	}
	if got, want := extendedScanner.scan(text), oracleBits(extendedGroups, text); got != want {
		t.Fatalf("extended scanner %04b, regexps %04b, for %q", got, want, clipForLog(text))
	}
}

func clipForLog(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func TestScannerSize(t *testing.T) {
	for _, sc := range []*scanner{seedScanner, extendedScanner} {
		stars := 0
		for _, e := range sc.entries {
			if e.star {
				stars++
			}
		}
		t.Logf("%d entries (%d with .*), %d states, %d byte classes, keys of up to %d bytes", len(sc.entries), stars, len(sc.outStart)-1, sc.nClasses, sc.key)
	}
}

func TestScannerRefusesWhatItCannotTake(t *testing.T) {
	for _, expr := range []string{`a(bc)*d`, `[_ ]abc`, `(ab|c)+`} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%q: no panic", expr)
				}
			}()
			var sc scanner
			for _, alt := range alternativesOf(expr) {
				sc.add(0, alt)
			}
		}()
	}
}

func TestScannerMatchesOracleOnCorpusAndPage(t *testing.T) {
	data, err := os.ReadFile("testdata/errors.tsv")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Split(line, "\t")
		if len(fields) >= 3 {
			checkAgainstOracle(t, fields[2])
			checkAgainstOracle(t, strings.ToUpper(fields[2]))
		}
	}
	page, err := os.ReadFile("testdata/page-64k.html")
	if err != nil {
		t.Fatal(err)
	}
	checkAgainstOracle(t, string(page))
	// Each pattern's example planted in the page's first 4 KiB (the whole
	// page takes the regexps too long to repeat for every example), at its
	// start, in its middle or at its end.
	var planted []string
	for expr, ex := range examples {
		planted = append(append(planted, ex[:]...), moreExamples[expr]...)
	}
	slices.Sort(planted)
	window := page[:4096]
	for i, ex := range planted {
		// At the window's start, middle or end, in turn.
		at := []int{0, len(window) / 2, len(window)}[i%3]
		checkAgainstOracle(t, string(window[:at])+ex+string(window[at:]))
	}
}

func TestScannerMatchesOracleOnExamples(t *testing.T) {
	for _, ex := range examples {
		for _, text := range []string{ex[0], ex[1], "x" + ex[0] + "y", ex[0] + "\n" + ex[1], strings.ToUpper(ex[0])} {
			checkAgainstOracle(t, text)
		}
	}
}

// Two cursors read a long text: every example straddling the middle, at
// every offset, in texts of lengths about the split, is still found. Under
// the race detector it checks one placement in acrossTheMiddleStride.
func TestScannerSeesLiteralsAcrossTheMiddle(t *testing.T) {
	placements, checked := 0, 0
	for _, n := range []int{splitAt, splitAt + 1, 2*splitAt + 3} {
		filler := strings.Repeat("ab ", n)[:n]
		for _, ex := range examples {
			text := filler + ex[0]
			if len(text) > n+len(ex[0]) {
				continue
			}
			mid := (n + len(ex[0])) / 2
			for at := max(0, mid-len(ex[0])-2); at <= min(n, mid+2); at++ {
				placements++
				if placements%acrossTheMiddleStride != 0 {
					continue
				}
				checked++
				checkAgainstOracle(t, filler[:at]+ex[0]+filler[at:])
				checkAgainstOracle(t, filler[:at]+ex[0]+"\n"+ex[1]+filler[at:])
			}
		}
	}
	t.Logf("%d placements of %d checked", checked, placements)
}

// scanWords are the patterns' words and pieces, so random texts often come
// close to a match.
var scanWords = func() []string {
	set := map[string]bool{}
	for _, p := range patterns {
		for _, w := range strings.FieldsFunc(p.Expr, func(r rune) bool { return strings.ContainsRune(" |()?.*+\\^[]", r) }) {
			set[w] = true
		}
	}
	for _, ex := range examples {
		set[ex[0]], set[ex[1]] = true, true
	}
	out := make([]string, 0, len(set))
	for w := range set {
		out = append(out, w)
	}
	return out
}()

func TestScannerMatchesOracleOnRandomTexts(t *testing.T) {
	noise := []string{" ", "", "_", "-", ".", ":", "=", "\n", "\r", "\u2028", "é", "😀", "\t", "0", "42", "(", ")", "\xff"}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 40).Draw(t, "n")
		var b strings.Builder
		for range n {
			w := rapid.SampledFrom(scanWords).Draw(t, "word")
			if rapid.Bool().Draw(t, "upper") {
				w = strings.ToUpper(w)
			}
			b.WriteString(w)
			b.WriteString(rapid.SampledFrom(noise).Draw(t, "noise"))
		}
		checkAgainstOracle(t, b.String())
	})
}

// FuzzScanner: go test ./classify -run '^$' -fuzz FuzzScanner
func FuzzScanner(f *testing.F) {
	for _, ex := range examples {
		f.Add(ex[0])
		f.Add(ex[1])
	}
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) && len(text) > 4096 {
			return
		}
		checkAgainstOracle(t, text)
	})
}

// The oracle's own speed, for comparison in docs/performance.md: the
// regexps of every group run one after another on the lowered text.
func BenchmarkRegexpOracleSeedCorpus(b *testing.B) {
	data, err := os.ReadFile("testdata/errors.tsv")
	if err != nil {
		b.Fatal(err)
	}
	// The rows of the set "original" (see corpus_test.go), so that the
	// figure stays comparable as the corpus grows.
	var msgs []string
	set := ""
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, "# rows:"); ok {
			set = strings.TrimSpace(name)
		}
		if fields := strings.Split(line, "\t"); set == "original" && len(fields) == 4 {
			msgs = append(msgs, fields[2])
		}
	}
	if len(msgs) != 83 {
		b.Fatalf("the original set has %d rows, want 83", len(msgs))
	}
	for b.Loop() {
		for _, m := range msgs {
			oracleBits(seedGroups, m)
		}
	}
}

func BenchmarkRegexpOracleSeedPage(b *testing.B) {
	page, err := os.ReadFile("testdata/page-64k.html")
	if err != nil {
		b.Fatal(err)
	}
	text := string(page)
	for b.Loop() {
		oracleBits(seedGroups, text)
	}
}
