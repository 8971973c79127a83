package agentfsm_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/agentfsm/agentfsm"

// core are the packages a program embeds the engine with: they import no
// provider SDK, telemetry or workflow library, only the standard library
// and coreDeps.
var core = map[string]bool{
	"transcript": true, "events": true, "history": true, "credentials": true, "classify": true, "states": true, "transitions": true, "fsm": true, "policy": true,
	"session": true, "session/rpc": true, "internal/lines": true, "internal/wiretext": true, "internal/sizes": true, "internal/owned": true, "internal/httpsafe": true, "session/eventlog": true,
}

var coreDeps = map[string]bool{"github.com/looplab/fsm": true}

// testOnly are the packages that serve tests (fake provider APIs): only a
// _test.go file may import them, never a library package or the command.
var testOnly = map[string]bool{"internal/providertest": true, "internal/baseline": true, "internal/factsgen": true}

// layers is the import order of design.md: a package may import only packages
// of a lower layer. An external test package (package x_test) is a client of
// the library, not part of it: it may import any library package, never the
// command.
var layers = map[string]int{
	"internal/lines":        0,
	"internal/wiretext":     0,
	"internal/httpsafe":     0,
	"internal/baseline":     0,
	"states":                0,
	"transcript":            1,
	"classify":              2,
	"internal/sizes":        2,
	"internal/owned":        2,
	"transitions":           3,
	"events":                4,
	"internal/factsgen":     4,
	"fsm":                   5,
	"fsm/svg":               6,
	"policy":                6,
	"history":               7,
	"credentials":           7,
	"limiter":               7,
	"session":               8,
	"session/scripted":      9,
	"session/rpc":           9,
	"internal/providertest": 9,
	"internal/sse":          9,
	"internal/apicall":      10,
	"props":                 10,
	"session/eventlog":      10,
	"session/otelsession":   10,
	"internal/scenarios":    10,
	"providers/openai":      11,
	"cmd/agentfsm/view":     10,
	"providers/anthropic":   11,
	"cmd/agentfsm":          12,
	".":                     13, // this test
}

// TestImportDirection parses every Go file of the module and fails when a
// package imports one in the same or a higher layer, or a package that is
// not in the list above.
func TestImportDirection(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "docs") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); path != "." && err == nil {
				return filepath.SkipDir // another module, with its own rules
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		layer, ok := layers[dir]
		if !ok {
			t.Errorf("%s: package %q has no place in the import layers; add it to imports_test.go", path, dir)
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		if strings.HasSuffix(f.Name.Name, "_test") && layer < layers["cmd/agentfsm"] {
			layer = layers["cmd/agentfsm"]
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if core[dir] && !strings.HasSuffix(path, "_test.go") && !strings.HasPrefix(p, module+"/") &&
				strings.Contains(strings.Split(p, "/")[0], ".") && !coreDeps[p] {
				t.Errorf("%s: the core package %s imports %s; it may import only the standard library and %v", path, dir, p, coreDeps)
			}
			if !strings.HasPrefix(p, module+"/") {
				continue
			}
			target := strings.TrimPrefix(p, module+"/")
			tl, ok := layers[target]
			switch {
			case testOnly[target] && !strings.HasSuffix(path, "_test.go"):
				t.Errorf("%s imports %s, which only tests may import", path, p)
			case !ok:
				t.Errorf("%s imports %s, which has no place in the import layers", path, p)
			case tl >= layer && target != dir:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must flow down", path, layer, target, tl)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
