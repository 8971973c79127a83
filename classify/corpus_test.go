package classify_test

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transcript"
)

// corpusPath is the labelled corpus of real provider error messages.
const corpusPath = "testdata/errors.tsv"

type corpusRow struct {
	line     int
	set      string // the "# rows: NAME" set the row belongs to
	label    classify.Class
	provider string
	message  string
	source   string
}

// corpusHeader is the column header, the first line that is not a comment.
const corpusHeader = "label\tprovider\tmessage\tsource"

// loadCorpus reads the corpus: lines starting with # are comments, and
// "# rows: NAME" starts the set NAME; the first other line is the header;
// every other line is a row of exactly four tab-separated fields, none
// empty, the source an http(s) address. An error names the line.
func loadCorpus() ([]corpusRow, error) {
	f, err := os.Open(corpusPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []corpusRow
	set, header := "", false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if comment, ok := strings.CutPrefix(text, "#"); ok {
			if name, ok := strings.CutPrefix(strings.TrimSpace(comment), "rows:"); ok {
				set = strings.TrimSpace(name)
			}
			continue
		}
		if !header {
			if text != corpusHeader {
				return nil, fmt.Errorf("%s:%d: the header is %q, want %q", corpusPath, n, text, corpusHeader)
			}
			header = true
			continue
		}
		fields := strings.Split(text, "\t")
		if len(fields) != 4 {
			return nil, fmt.Errorf("%s:%d: %d fields, want 4", corpusPath, n, len(fields))
		}
		label, err := classify.ParseClass(fields[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", corpusPath, n, err)
		}
		switch {
		case fields[1] == "" || fields[2] == "":
			return nil, fmt.Errorf("%s:%d: an empty provider or message", corpusPath, n)
		case !strings.HasPrefix(fields[3], "https://") && !strings.HasPrefix(fields[3], "http://"):
			return nil, fmt.Errorf("%s:%d: the source %q is not an http(s) address", corpusPath, n, fields[3])
		case set == "":
			return nil, fmt.Errorf("%s:%d: a row before any \"# rows: NAME\" line", corpusPath, n)
		}
		rows = append(rows, corpusRow{line: n, set: set, label: label, provider: fields[1], message: fields[2], source: fields[3]})
	}
	return rows, sc.Err()
}

// readCorpus loads the corpus; a missing corpus fails the test.
func readCorpus(t testing.TB) []corpusRow {
	t.Helper()
	rows, err := loadCorpus()
	require.NoError(t, err)
	require.NotEmpty(t, rows)
	return rows
}

// originalSet is the set of the 83 rows the extended rules were first
// written against; the benchmarks run on it alone.
const originalSet = "original"

// corpusClass is how the extended rules classify a row: its message as the
// error text of a failed call.
func corpusClass(r corpusRow) classify.Class {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return classify.Extended.Classify(classify.Message{StopReason: transcript.StopReasonError, ErrorMessage: r.message}, now).Class
}

// agrees reports whether got is right for a row labelled label. A none row
// (a user abort's text, as an SDK surfaces it) agrees with an answer that
// takes no automatic action: none, or fatal.
func agrees(label, got classify.Class) bool {
	return got == label || (label == classify.None && got == classify.Fatal)
}

// confusion is a confusion matrix: rows by label, columns by class.
type confusion struct {
	n     [5][5]int
	agree int
	total int
}

func (c *confusion) add(label, got classify.Class) {
	c.n[label][got]++
	c.total++
	if agrees(label, got) {
		c.agree++
	}
}

func (c *confusion) share() float64 { return float64(c.agree) / float64(max(c.total, 1)) }

// markdown renders the matrix with the agreement per label and overall.
func (c *confusion) markdown() string {
	var b strings.Builder
	b.WriteString("| label \\ classified |")
	for _, col := range classify.Classes() {
		fmt.Fprintf(&b, " %s |", col)
	}
	b.WriteString(" rows | agree |\n|---|---|---|---|---|---|---|---|\n")
	for _, label := range classify.Classes() {
		rows, ok := 0, 0
		for _, got := range classify.Classes() {
			rows += c.n[label][got]
			if agrees(label, got) {
				ok += c.n[label][got]
			}
		}
		if rows == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s |", label)
		for _, got := range classify.Classes() {
			fmt.Fprintf(&b, " %d |", c.n[label][got])
		}
		fmt.Fprintf(&b, " %d | %d (%.0f%%) |\n", rows, ok, 100*float64(ok)/float64(rows))
	}
	fmt.Fprintf(&b, "| all | | | | | | %d | %d (%.1f%%) |\n", c.total, c.agree, 100*c.share())
	return b.String()
}

// corpusFloor is the share of all rows the extended rules must agree with
// (issue item 2). The rules are written from what providers say, not
// fitted to rows; docs/classification.md lists every miss.
const corpusFloor = 0.95

// retryableFatal are the fatal rows the extended rules may call retryable,
// each for a reason its text cannot show. No other fatal row may be
// retryable: in particular no malformed request (tool calls that do not
// pair up) and no request larger than its budget.
var retryableFatal = map[int]string{
	214: "xAI's \"Tokens per Minute (actual/limit): 65605/16000\" does not say whether this request alone is over the limit",
	353: "an Ollama runner crash behind a 500 Internal Server Error: the text cannot tell a crash that repeats from one a reload fixes",
}

func TestCorpus(t *testing.T) {
	rows := readCorpus(t)
	sets := map[string]*confusion{}
	all := &confusion{}
	for _, r := range rows {
		got := corpusClass(r)
		all.add(r.label, got)
		if sets[r.set] == nil {
			sets[r.set] = &confusion{}
		}
		sets[r.set].add(r.label, got)
		if !agrees(r.label, got) {
			t.Logf("miss line %d (%s): labelled %s, classified %s: %.120s", r.line, r.provider, r.label, got, r.message)
		}
		switch {
		case r.label == classify.Overflow && got == classify.Retryable:
			t.Errorf("line %d: an overflow classified retryable: %s", r.line, r.message)
		case r.label == classify.Fatal && got == classify.Retryable && retryableFatal[r.line] == "":
			t.Errorf("line %d: a fatal error classified retryable: %s", r.line, r.message)
		}
	}
	for line := range retryableFatal {
		i := slices.IndexFunc(rows, func(r corpusRow) bool { return r.line == line })
		if assert.GreaterOrEqual(t, i, 0, "retryableFatal names line %d, which is no row", line) {
			assert.Equal(t, classify.Retryable, corpusClass(rows[i]), "retryableFatal names line %d, which is not classified retryable", line)
			assert.Equal(t, classify.Fatal, rows[i].label, "line %d", line)
		}
	}
	require.Contains(t, sets, originalSet)
	require.Equal(t, 83, sets[originalSet].total, "the original set")
	for _, name := range slices.Sorted(maps.Keys(sets)) {
		t.Logf("rows %q:\n%s", name, sets[name].markdown())
	}
	t.Logf("all rows:\n%s", all.markdown())
	t.Logf("extended rules agree on %d/%d rows (%.1f%%); on the original %d, %d (%.1f%%)",
		all.agree, all.total, 100*all.share(), sets[originalSet].total, sets[originalSet].agree, 100*sets[originalSet].share())
	if all.share() < corpusFloor {
		t.Errorf("agreement %.1f%% is below the floor of %.0f%%", 100*all.share(), 100*corpusFloor)
	}
}

// The loader refuses a corpus line it cannot read, naming the line.
func TestCorpusIsWellFormed(t *testing.T) {
	rows := readCorpus(t)
	seen := map[string]int{}
	for _, r := range rows {
		if first, ok := seen[r.message]; ok {
			t.Errorf("line %d repeats line %d: %.80s", r.line, first, r.message)
		}
		seen[r.message] = r.line
		assert.NotEqual(t, r.message, strings.TrimSpace(r.message)+" ", "line %d", r.line)
	}
}

// TestSeedAnswersTheOriginalSetAsTheReference: the seed rules give the
// original rows the classes the reference's own regexps give them on V8
// (scripts/reference-classify.mjs prints them: fatal 38, overflow 18,
// retryable 27 of which 4 take the usage-limit branch), but for the one
// documented difference (docs/policy.md §2.3): "429 Too many tokens, please
// wait before trying again" is a throttle here, an overflow there. So the
// speed comparison in docs/performance.md compares the same answers.
func TestSeedAnswersTheOriginalSetAsTheReference(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	counts := map[string]int{}
	for _, r := range readCorpus(t) {
		if r.set != originalSet {
			continue
		}
		res := classify.Seed.Classify(classify.Message{StopReason: transcript.StopReasonError, ErrorMessage: r.message}, now)
		name := res.Class.String()
		if res.UsageLimit {
			name += "+usage"
		}
		counts[name]++
	}
	require.Equal(t, map[string]int{"fatal": 38, "overflow": 18 - 1, "retryable": 23 + 1, "retryable+usage": 4}, counts)
}

// resetHintsSet is the set of the rows that say when a limit resets.
const resetHintsSet = "reset-hints"

// TestCorpusHints (issue 24): every row of the reset-hints set gives the
// retry hint its text states, read as the corpus is classified (at
// 2026-01-01 00:00 UTC), each by its source.
func TestCorpusHints(t *testing.T) {
	want := map[string]time.Duration{
		"https://github.com/anthropics/claude-code/issues/15064":       15 * time.Hour, // 9am in Chicago (UTC−6)
		"https://github.com/anthropics/claude-code/issues/22946":       3 * time.Hour,  // 10pm in New York (UTC−5)
		"https://github.com/anthropics/claude-code/issues/77082":       11*time.Hour + 30*time.Minute,
		"https://github.com/anthropics/claude-code/issues/2087":        18 * time.Hour, // 1pm at UTC−5, tomorrow
		"https://github.com/anthropics/claude-code/issues/11429":       0,              // an epoch in the past
		"https://github.com/openai/codex/issues/3124":                  65*time.Hour + 14*time.Minute,
		"https://github.com/openai/codex/issues/3257":                  116*time.Hour + 9*time.Minute,
		"https://github.com/james-6-23/codex2api/issues/9":             602705 * time.Second,
		"https://github.com/BuilderIO/micro-agent/issues/86":           644 * time.Millisecond,
		"https://github.com/semanser/codel/issues/72":                  18642 * time.Millisecond,
		"https://github.com/RooCodeInc/Roo-Code/issues/3883":           26 * time.Second,
		"https://github.com/liuw1535/antigravity2api-nodejs/issues/44": 581981300432511 * time.Nanosecond,
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := 0
	for _, r := range readCorpus(t) {
		if r.set != resetHintsSet {
			continue
		}
		seen++
		d, ok := want[r.source]
		if !assert.True(t, ok, "line %d: no hint stated for %s", r.line, r.source) {
			continue
		}
		res := classify.Extended.Classify(classify.Message{StopReason: transcript.StopReasonError, ErrorMessage: r.message}, now)
		assert.True(t, res.HasRetryAfter, "line %d: no hint", r.line)
		assert.Equal(t, d, res.RetryAfter, "line %d", r.line)
	}
	assert.Equal(t, len(want), seen, "rows of the set %q", resetHintsSet)
}
