package policy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/transitions"
)

// TestNothingDecidesByEventName reads the package's own code: no file of
// it names an event of the table (transitions.Retry, transitions.Settle,
// ...), so no code here can choose what to do by the rule that was taken.
// What a rule does is its actions (policy/actions.go, keyed by action).
func TestNothingDecidesByEventName(t *testing.T) {
	events := map[string]bool{}
	for _, r := range transitions.Table() {
		events[string(r.Event)] = true
	}
	// The names of the Event constants, as the code spells them.
	names := map[string]bool{}
	fset := token.NewFileSet()
	tfile, err := parser.ParseFile(fset, "../transitions/table.go", nil, 0)
	require.NoError(t, err)
	for _, d := range tfile.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Event" {
				for _, n := range vs.Names {
					names[n.Name] = true
				}
			}
		}
	}
	require.Len(t, names, len(events), "every event of the table has a constant")

	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		file, err := parser.ParseFile(fset, f, src, 0)
		require.NoError(t, err)
		checked++
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				// Constants of other types may share a word with an event
				// (CompactionReason "overflow"): only their uses matter.
				if n.Tok == token.CONST {
					return false
				}
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "transitions" && names[n.Sel.Name] {
					t.Errorf("%s: names the event transitions.%s: what a rule does belongs in its actions", fset.Position(n.Pos()), n.Sel.Name)
				}
				if x, ok := n.X.(*ast.Ident); n.Sel.Name == "Event" && !(ok && x.Name == "transitions") {
					// tr.Event, rule.Event: only reporting a move may read it.
					if f != "step.go" {
						t.Errorf("%s: reads a rule's Event outside the report of a move", fset.Position(n.Pos()))
					}
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && events[strings.Trim(n.Value, "`\"")] {
					t.Errorf("%s: spells the event %s", fset.Position(n.Pos()), n.Value)
				}
			}
			return true
		})
	}
	assert.Greater(t, checked, 10)
}
