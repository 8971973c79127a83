// Package svg renders the recovery machine's diagram as SVG, in process, with
// a WebAssembly build of Graphviz (github.com/goccy/go-graphviz): no Graphviz
// install is needed.
//
// It is a package of its own so that programs which only run the machine do
// not link Graphviz. It draws; it does not decide what to draw (package fsm's
// DOT does).
package svg

import (
	"bytes"
	"context"
	"fmt"

	"github.com/goccy/go-graphviz"

	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/transitions"
)

// Render lays out fsm.DOT(rules) with Graphviz's dot layout and returns the
// SVG. The same rules always give the same bytes.
func Render(ctx context.Context, rules []transitions.Rule) ([]byte, error) {
	return renderDOT(ctx, []byte(fsm.DOT(rules)))
}

// renderDOT lays out a Graphviz DOT document and returns it as SVG.
func renderDOT(ctx context.Context, dot []byte) ([]byte, error) {
	gv, err := graphviz.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("svg: starting graphviz: %w", err)
	}
	defer gv.Close()
	graph, err := graphviz.ParseBytes(dot)
	if err != nil {
		return nil, fmt.Errorf("svg: parsing DOT: %w", err)
	}
	defer graph.Close()
	var buf bytes.Buffer
	if err := gv.Render(ctx, graph, graphviz.SVG, &buf); err != nil {
		return nil, fmt.Errorf("svg: rendering: %w", err)
	}
	return buf.Bytes(), nil
}
