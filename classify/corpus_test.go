package classify_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
)

// corpusPath is the labelled corpus of real provider error messages.
const corpusPath = "testdata/errors.tsv"

type corpusRow struct {
	line     int
	label    classify.Class
	provider string
	message  string
}

// loadCorpus reads the corpus.
func loadCorpus() ([]corpusRow, error) {
	f, err := os.Open(corpusPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []corpusRow
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if n == 1 {
			continue // header
		}
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) < 3 {
			return nil, fmt.Errorf("%s:%d: %d fields, want 4", corpusPath, n, len(fields))
		}
		label, err := classify.ParseClass(fields[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", corpusPath, n, err)
		}
		rows = append(rows, corpusRow{n, label, fields[1], fields[2]})
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

// corpusFloor is the share of rows the extended rules must agree with, set
// from what they achieve: 77 of 83. The rules are written from what
// providers say, not fitted to rows. Five misses are overflows whose wording
// the policy's overflow list (§2.3, shared by both rule sets so that they
// never disagree on an overflow) does not name; they classify fatal, never
// retryable. docs/classification.md lists every miss.
const corpusFloor = 0.92

func TestCorpus(t *testing.T) {
	rows := readCorpus(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type tally struct{ agree, total int }
	per := map[classify.Class]*tally{}
	agree := 0
	for _, r := range rows {
		got := classify.Extended.Classify(classify.Message{StopReason: classify.StopReasonError, ErrorMessage: r.message}, now)
		tl := per[r.label]
		if tl == nil {
			tl = &tally{}
			per[r.label] = tl
		}
		tl.total++
		if got.Class == r.label {
			tl.agree++
			agree++
		} else {
			t.Logf("miss line %d (%s): labelled %s, classified %s: %.120s", r.line, r.provider, r.label, got.Class, r.message)
		}
		if r.label == classify.Overflow && got.Class == classify.Retryable {
			t.Errorf("line %d: an overflow classified retryable: %s", r.line, r.message)
		}
	}
	for _, c := range classify.Classes() {
		if tl := per[c]; tl != nil {
			t.Logf("%-12s %2d/%2d agree (%.0f%%)", c, tl.agree, tl.total, 100*float64(tl.agree)/float64(tl.total))
		}
	}
	share := float64(agree) / float64(len(rows))
	t.Logf("extended rules agree on %d/%d rows (%.1f%%)", agree, len(rows), 100*share)
	if share < corpusFloor {
		t.Errorf("agreement %.1f%% is below the floor of %.0f%%", 100*share, 100*corpusFloor)
	}
}
