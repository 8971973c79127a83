package agentfsm_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
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
		"classify":    {"Classes", "IsOverflow", "Patterns", "Pattern", "Group", "GroupOverflow", "GroupNotOverflow", "GroupSeedRetry", "GroupUsageFlag", "GroupExtendedRetry", "GroupExtendedUsage"},
		"session/rpc": {"MaxLine"},
		"policy":      {"EffectKinds"},
		"transitions": {"Signals"},
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

// api returns the exported names of the package in dir, as exported does,
// without the methods of unexported types: what go doc shows a user.
func api(t *testing.T, dir string) []string {
	names := exported(t, dir)
	var out []string
	for n := range names {
		if i := strings.Index(n, "."); i > 0 && !names[n[:i]] {
			continue
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestAPISize: a newcomer can hold the API. Every type has one home
// (transcript, events, policy, history, credentials), session drives and
// re-exports nothing. The counts are exported identifiers with the methods
// of exported types. Issue 22 item 4.
func TestAPISize(t *testing.T) {
	limits := map[string]int{"policy": 80, "session": 60, "classify": 40}
	for dir, limit := range limits {
		names := api(t, dir)
		t.Logf("%s: %d exported names (limit %d)", dir, len(names), limit)
		if len(names) > limit {
			t.Errorf("package %s exports %d names, more than %d:\n%s", dir, len(names), limit, strings.Join(names, "\n"))
		}
	}
}

// TestNoAliases: no package re-exports another's type under its own name,
// so that go doc shows every type where it is defined.
func TestNoAliases(t *testing.T) {
	for _, dir := range []string{"session", "policy", "transcript", "events", "history", "credentials", "classify"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				if d, ok := decl.(*ast.GenDecl); ok && d.Tok == token.TYPE {
					for _, spec := range d.Specs {
						if s := spec.(*ast.TypeSpec); s.Assign.IsValid() && s.Name.IsExported() {
							t.Errorf("%s: type %s is an alias of another package's type", path, s.Name.Name)
						}
					}
				}
			}
		}
	}
}
