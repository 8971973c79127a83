// Package svg renders the recovery machine's diagram as SVG, in process, with
// a WebAssembly build of Graphviz (github.com/goccy/go-graphviz): no Graphviz
// install is needed.
//
// It is a package of its own so that programs which only run the machine do
// not link Graphviz. It draws; it does not decide what to draw (package fsm's
// DOT does).
//
// This module builds go-graphviz from a patched copy (third_party/go-graphviz,
// PATCHES.md there): nothing happens at program start; the first Render
// compiles Graphviz's WebAssembly module in memory (about half a second),
// without a compilation cache, so it writes nothing to disk and reads no
// cache that another user could have left. A program that imports this
// package from another module gets upstream go-graphviz instead, which
// compiles the module in its package init, with a cache under os.TempDir().
package svg

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/goccy/go-graphviz"

	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/transitions"
)

// Render lays out fsm.DOT(rules) with Graphviz's dot layout and returns the
// SVG. The same rules always give the same bytes. An error, such as the
// Graphviz module failing to compile, is one line that starts "svg: ".
func Render(ctx context.Context, rules []transitions.Rule) ([]byte, error) {
	return renderDOT(ctx, []byte(fsm.DOT(rules)))
}

// renderDOT lays out a Graphviz DOT document and returns it as SVG.
func renderDOT(ctx context.Context, dot []byte) ([]byte, error) {
	gv, err := graphviz.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("svg: starting graphviz: %w", oneLine{err})
	}
	defer gv.Close()
	graph, err := graphviz.ParseBytes(dot)
	if err != nil {
		return nil, fmt.Errorf("svg: parsing DOT: %w", oneLine{err})
	}
	defer graph.Close()
	var buf bytes.Buffer
	if err := gv.Render(ctx, graph, graphviz.SVG, &buf); err != nil {
		return nil, fmt.Errorf("svg: rendering: %w", oneLine{err})
	}
	return buf.Bytes(), nil
}

// oneLine is an error of Graphviz's, whose messages end in a newline and
// may run over several lines, as one line.
type oneLine struct{ err error }

func (e oneLine) Error() string { return strings.Join(strings.Fields(e.err.Error()), " ") }

func (e oneLine) Unwrap() error { return e.err }
