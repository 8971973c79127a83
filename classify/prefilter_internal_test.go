package classify

import (
	"os"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// hintNames are every literal the text hint readers search for with
// indexFold, each of which the byte prefilter may rule out.
func hintNames() []string {
	var names []string
	for _, r := range hintRules {
		names = append(names, r.name)
	}
	for _, g := range resetGroups {
		names = append(names, g.reset...)
		names = append(names, g.remaining...)
	}
	for _, r := range textRules {
		names = append(names, r.name)
	}
	names = append(names, phrases[:]...)
	return append(names, "reset")
}

// unfiltered is RetryAfter without the byte prefilter: every name searched.
func unfiltered(text string, now time.Time) (time.Duration, bool) {
	all := ^uint64(0)
	return hint(&source{text: text, isText: true, bytes: byteSet{all, all}}, now)
}

// prefilterText is a text built from the hint names' own pieces, in any
// case, among other bytes, so that names are found, nearly found (a byte
// missing) and found only across case.
func prefilterText(t *rapid.T) string {
	names := hintNames()
	pieces := append(names, ": ", "=", "\"", "30", "1767225600", "2026-12-01T23:00:00Z", "6m0s", " 3pm ", "|", " ", "é", "\xff", "503 Service Unavailable")
	var b strings.Builder
	for n := rapid.IntRange(0, 12).Draw(t, "n"); n > 0; n-- {
		p := rapid.SampledFrom(pieces).Draw(t, "piece")
		if rapid.Bool().Draw(t, "cut") && len(p) > 1 {
			i := rapid.IntRange(0, len(p)-1).Draw(t, "at")
			p = p[:i] + p[i+1:] // a byte missing
		}
		if rapid.Bool().Draw(t, "upper") {
			p = strings.ToUpper(p)
		}
		b.WriteString(p)
	}
	return b.String()
}

// TestPrefilterRulesOutOnlyAbsentNames holds the byte prefilter exact: a
// name it rules out is one indexFold does not find, and RetryAfter reads
// the same hint with it as without it, for texts on both sides of
// maxPrefiltered and for every text of the error corpus.
func TestPrefilterRulesOutOnlyAbsentNames(t *testing.T) {
	now := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	check := func(t interface{ Fatalf(string, ...any) }, text string) {
		set := foldedBytes(text)
		for _, name := range hintNames() {
			if !set.mayHold(name) && indexFold(text, []byte(name)) >= 0 {
				t.Fatalf("the prefilter rules out %q, which %q holds", name, text)
			}
		}
		d, ok := RetryAfter(text, now)
		if wd, wok := unfiltered(text, now); d != wd || ok != wok {
			t.Fatalf("RetryAfter(%q) = %v, %v; without the prefilter %v, %v", text, d, ok, wd, wok)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		text := prefilterText(t)
		if rapid.Bool().Draw(t, "long") {
			text += strings.Repeat("x", maxPrefiltered) // past the prefilter's reach
		}
		check(t, text)
	})
	corpus, err := os.ReadFile("testdata/errors.tsv")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.SplitSeq(string(corpus), "\n") {
		if f := strings.Split(line, "\t"); !strings.HasPrefix(line, "#") && len(f) >= 3 {
			check(t, strings.ReplaceAll(f[2], `\n`, "\n"))
			n++
		}
	}
	if n < 100 {
		t.Fatalf("read %d texts of the corpus", n)
	}
}

// TestPrefilterRulesOutAbsentNames holds that the prefilter rules names
// out: a short text without a hint rules out most names, so that
// RetryAfter does not search it for each; a text past maxPrefiltered
// rules out none.
func TestPrefilterRulesOutAbsentNames(t *testing.T) {
	set := foldedBytes("503 Service Unavailable")
	out := 0
	for _, name := range hintNames() {
		if !set.mayHold(name) {
			out++
		}
	}
	if all := len(hintNames()); out != all {
		t.Fatalf("the prefilter rules out %d names of %d in a 503's text", out, all)
	}
	if !set.mayHold("service") || !set.mayHold("unavailable") {
		t.Fatal("the prefilter rules out a name the text holds")
	}
	long := foldedBytes(strings.Repeat("0", maxPrefiltered+1))
	for _, name := range hintNames() {
		if !long.mayHold(name) {
			t.Fatalf("the prefilter rules out %q in a text longer than %d bytes", name, maxPrefiltered)
		}
	}
}
