package classify

import (
	"fmt"
	"strings"
)

// PatternTables renders each pattern group as a Markdown table, by the
// group's name: the generated blocks of docs/classification.md, which
// docs_test.go fills.
func PatternTables() map[string]string {
	tables := map[string]string{}
	for _, p := range patterns {
		t, ok := tables[string(p.Group)]
		if !ok {
			t = "| pattern | from |\n|---|---|\n"
		}
		tables[string(p.Group)] = t + fmt.Sprintf("| `%s` | %s |\n", strings.ReplaceAll(p.Expr, "|", `\|`), strings.ReplaceAll(p.Source, "|", `\|`))
	}
	return tables
}

// PatternList is every pattern, in classification order.
func PatternList() []pattern { return patterns }

// IsOverflow is the seed overflow list's answer alone (isOverflow), which
// the tests compare with Classify.
var IsOverflow = isOverflow

// Classes returns the five classes in declaration order.
func Classes() []Class {
	var cs []Class
	for c := None; c.Valid(); c++ {
		cs = append(cs, c)
	}
	return cs
}
