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

// TestNothingDecidesByTriggerName reads the package's own code: no file of
// it names a trigger or an action of the table (transitions.Retry,
// transitions.Accept, transitions.ScheduleBackoff, ...), so no code here
// can choose what to do by the rule that was taken or switch over its
// actions. What a rule does is its actions, each a function named after it
// (policy/actions.go, bound by position: TestActionsAreNamedAfterTheTable).
func TestNothingDecidesByTriggerName(t *testing.T) {
	triggers := map[string]bool{}
	for _, r := range transitions.Table() {
		triggers[string(r.Trigger)] = true
	}
	// The names of the Trigger constants, as the code spells them.
	names := map[string]bool{}
	fset := token.NewFileSet()
	var decls []ast.Decl
	for _, f := range []string{"../transitions/table.go", "../transitions/actions.go"} {
		tfile, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		decls = append(decls, tfile.Decls...)
	}
	for _, d := range decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); ok && (id.Name == "Trigger" || id.Name == "Action") {
				for _, n := range vs.Names {
					names[n.Name] = true
				}
			}
		}
	}
	require.Len(t, names, len(triggers)+len(transitions.Actions()), "every trigger and action of the table has a constant")

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
				// Constants of other types may share a word with a trigger
				// (CompactionReason "overflow"): only their uses matter.
				if n.Tok == token.CONST {
					return false
				}
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "transitions" && names[n.Sel.Name] {
					t.Errorf("%s: names transitions.%s: what a rule does belongs in its actions, each a function of its own", fset.Position(n.Pos()), n.Sel.Name)
				}
				if n.Sel.Name == "Trigger" {
					// tr.Trigger, rule.Trigger, or a value of type
					// transitions.Trigger: the machine hands the move's
					// report with the move (fsm.Transition.Change), so
					// nothing here has a reason to read a trigger.
					t.Errorf("%s: reads a rule's trigger: what a move does and reports comes with the move", fset.Position(n.Pos()))
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && triggers[strings.Trim(n.Value, "`\"")] {
					t.Errorf("%s: spells the trigger %s", fset.Position(n.Pos()), n.Value)
				}
			}
			return true
		})
	}
	assert.Greater(t, checked, 10)
}
