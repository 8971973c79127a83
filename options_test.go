package agentfsm_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryOptionSaysWhatNilDoes: every exported With... function of the
// module whose argument can be nil says in its doc comment what nil does
// (the rule is WithObserver's: New fails). The values that cannot be nil
// are listed; a new option with another argument type must say.
func TestEveryOptionSaysWhatNilDoes(t *testing.T) {
	valueTypes := map[string]bool{"bool": true, "int": true, "string": true, "policy.Config": true, "policy.Model": true, "policy.Snapshot": true}
	fset := token.NewFileSet()
	found := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || nestedModule(path)) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "With") || !fn.Name.IsExported() {
				continue
			}
			for _, p := range fn.Type.Params.List {
				typ := p.Type
				if valueTypes[types.ExprString(typ)] {
					continue
				}
				found++
				if fn.Doc == nil || !strings.Contains(fn.Doc.Text(), "nil") {
					t.Errorf("%s: %s takes an argument of type %s, and its doc comment does not say what nil does", path, fn.Name.Name, types.ExprString(typ))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 8 {
		t.Errorf("found %d options with a nil-able argument, want at least the 8 of session and otelsession", found)
	}
}

// nestedModule reports whether dir holds a Go module of its own (temporal/,
// a patched dependency under third_party/): its options are not this
// module's.
func nestedModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return !errors.Is(err, fs.ErrNotExist)
}
