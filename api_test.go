package agentfsm_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exported returns the exported top-level names declared in the non-test
// files of the package in dir: functions, types, constants and variables as
// "Name", methods as "Type.Name".
func exported(t *testing.T, dir string) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				if d.Recv != nil {
					typ := d.Recv.List[0].Type
					if star, ok := typ.(*ast.StarExpr); ok {
						typ = star.X
					}
					if id, ok := typ.(*ast.Ident); ok {
						name = id.Name + "." + name
					}
				}
				names[name] = true
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
	}
	for name := range names {
		if !ast.IsExported(name[strings.LastIndex(name, ".")+1:]) {
			delete(names, name)
		}
	}
	return names
}

// TestTestOnlyNamesAreInternal: names that only tests and the generators of
// the docs used are not part of the API. Issue item 5.
func TestTestOnlyNamesAreInternal(t *testing.T) {
	internal := map[string][]string{
		"fsm":         {"Machine.Fire", "Machine.Can", "Machine.Rules", "RulesMarkdown"},
		"fsm/svg":     {"RenderDOT"},
		"classify":    {"Patterns", "Pattern", "Group", "GroupOverflow", "GroupNotOverflow", "GroupSeedRetry", "GroupUsageFlag", "GroupExtendedRetry", "GroupExtendedUsage"},
		"session/rpc": {"MaxLine"},
	}
	for dir, names := range internal {
		api := exported(t, dir)
		for _, name := range names {
			if api[name] {
				t.Errorf("package %s exports %s, which only tests use", dir, name)
			}
		}
	}
}
