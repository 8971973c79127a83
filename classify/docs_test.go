package classify_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
)

var update = flag.Bool("update", false, "rewrite the generated blocks of docs/classification.md")

const classificationDoc = "../docs/classification.md"

// corpusReport renders the extended rules' agreement with the corpus, per
// label, and every row they miss.
func corpusReport(rows []corpusRow) string {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b, misses strings.Builder
	agree := map[classify.Class]int{}
	total := map[classify.Class]int{}
	all := 0
	for _, r := range rows {
		got := classify.Extended.Classify(classify.Message{StopReason: classify.StopReasonError, ErrorMessage: r.message}, now).Class
		total[r.label]++
		if got == r.label {
			agree[r.label]++
			all++
			continue
		}
		msg := r.message
		if runes := []rune(msg); len(runes) > 110 {
			msg = string(runes[:110]) + "…"
		}
		msg = strings.NewReplacer("|", `\|`, "`", "'").Replace(msg)
		fmt.Fprintf(&misses, "| %d | %s | %s | %s | %s |\n", r.line, r.provider, r.label, got, msg)
	}
	b.WriteString("| label | rows | extended agrees |\n|---|---|---|\n")
	for _, c := range classify.Classes() {
		if total[c] > 0 {
			fmt.Fprintf(&b, "| %s | %d | %d (%.0f%%) |\n", c, total[c], agree[c], 100*float64(agree[c])/float64(total[c]))
		}
	}
	fmt.Fprintf(&b, "| all | %d | %d (%.1f%%) |\n\n", len(rows), all, 100*float64(all)/float64(len(rows)))
	b.WriteString("Rows the extended rules miss:\n\n| line | provider | label | classified | message |\n|---|---|---|---|---|\n")
	b.WriteString(misses.String())
	return b.String()
}

var docBlock = regexp.MustCompile(`(?s)(<!-- generated:([\w-]+) begin -->\n)(.*?)(<!-- generated:[\w-]+ end -->)`)

func TestClassificationDocIsCurrent(t *testing.T) {
	blocks := classify.PatternTables()
	rows, err := loadCorpus()
	if err == nil {
		blocks["corpus"] = corpusReport(rows)
	}
	doc, err := os.ReadFile(classificationDoc)
	require.NoError(t, err)
	found := map[string]bool{}
	filled := docBlock.ReplaceAllFunc(doc, func(m []byte) []byte {
		g := docBlock.FindSubmatch(m)
		name := string(g[2])
		body, ok := blocks[name]
		if !ok {
			if name != "corpus" {
				t.Errorf("unknown generated block %q", name)
			}
			return m
		}
		found[name] = true
		return []byte(string(g[1]) + body + string(g[4]))
	})
	for name := range blocks {
		if !found[name] {
			t.Errorf("%s has no generated block %q", classificationDoc, name)
		}
	}
	if *update {
		require.NoError(t, os.WriteFile(classificationDoc, filled, 0o644))
		return
	}
	if !bytes.Equal(doc, filled) {
		t.Errorf("%s is stale: run go test ./classify -update", classificationDoc)
	}
}
