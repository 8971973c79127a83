//go:build svg

package main

import (
	"context"

	"github.com/agentfsm/agentfsm/fsm/svg"
	"github.com/agentfsm/agentfsm/transitions"
)

// svgBuilt reports whether this binary draws SVG itself.
const svgBuilt = true

// renderSVG draws the diagram with the WebAssembly Graphviz of package
// fsm/svg.
func renderSVG(rules []transitions.Rule) ([]byte, error) {
	return svg.Render(context.Background(), rules)
}
