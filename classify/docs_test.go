package classify_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
)

var update = flag.Bool("update", false, "rewrite the generated blocks of docs/classification.md")

const classificationDoc = "../docs/classification.md"

// corpusReport renders the extended rules' confusion matrix on the whole
// corpus, on each set of rows, and every row they miss.
func corpusReport(rows []corpusRow) string {
	var b, misses strings.Builder
	all := &confusion{}
	sets := map[string]*confusion{}
	var order []string
	for _, r := range rows {
		got := corpusClass(r)
		all.add(r.label, got)
		if sets[r.set] == nil {
			sets[r.set] = &confusion{}
			order = append(order, r.set)
		}
		sets[r.set].add(r.label, got)
		if agrees(r.label, got) {
			continue
		}
		msg := r.message
		if runes := []rune(msg); len(runes) > 110 {
			msg = string(runes[:110]) + "…"
		}
		msg = strings.NewReplacer("|", `\|`, "`", "'").Replace(msg)
		fmt.Fprintf(&misses, "| %d | %s | %s | %s | %s |\n", r.line, r.provider, r.label, got, msg)
	}
	fmt.Fprintf(&b, "All %d rows:\n\n%s", all.total, all.markdown())
	for _, name := range order {
		fmt.Fprintf(&b, "\nThe %d rows of the set `%s`:\n\n%s", sets[name].total, name, sets[name].markdown())
	}
	b.WriteString("\nRows the extended rules miss:\n\n| line | provider | label | classified | message |\n|---|---|---|---|---|\n")
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
