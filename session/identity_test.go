package session_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoGoroutineIdentity reads the code of session and of its packages:
// none of it tells goroutines apart. A call from inside a callback is told
// by the session value the callback is handed (SubscribeSession,
// FromContext), never by the goroutine it is made on, which Go exposes only
// through a stack trace ("goroutine 18 [running]:") or the runtime's
// internals. So no file calls runtime.Stack, declares or calls a goid
// helper, parses a trace's "goroutine " header, or links to the runtime's
// unexported functions (go:linkname).
func TestNoGoroutineIdentity(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		checked++
		runtimeName := "" // what the file calls package runtime
		for _, imp := range file.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "runtime" {
				runtimeName = "runtime"
				if imp.Name != nil {
					runtimeName = imp.Name.Name
				}
			}
		}
		for _, group := range file.Comments {
			for _, c := range group.List {
				if strings.HasPrefix(c.Text, "//go:linkname") {
					t.Errorf("%s: %s: a link to the runtime's internals", fset.Position(c.Pos()), c.Text)
				}
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && runtimeName != "" && x.Name == runtimeName && n.Sel.Name == "Stack" {
					t.Errorf("%s: calls runtime.Stack", fset.Position(n.Pos()))
				}
			case *ast.Ident:
				if name := strings.ToLower(n.Name); strings.Contains(name, "goid") || strings.Contains(name, "goroutineid") {
					t.Errorf("%s: names %s, a goroutine ID", fset.Position(n.Pos()), n.Name)
				}
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && strings.HasPrefix(s, "goroutine ") {
					t.Errorf("%s: parses a stack trace's header %q", fset.Position(n.Pos()), s)
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, checked, 20, "the walk read the package and its subpackages")
}
