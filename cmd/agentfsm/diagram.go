package main

import (
	"errors"
	"fmt"

	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/transitions"
)

// errNoSVG is what --format svg answers in a binary built without the
// build tag svg.
var errNoSVG = errors.New("--format svg is not in this build (it would carry Graphviz built to WebAssembly): " +
	"pipe the DOT into Graphviz, `agentfsm diagram --format dot | dot -Tsvg > machine.svg`, " +
	"or build with `go build -tags svg ./cmd/agentfsm`")

// runDiagram prints the state diagram in one write; exit 1, with a one-line
// reason, when the SVG cannot be drawn or stdout cannot take it. SVG is
// drawn in process only by a binary built with the build tag svg
// (diagram_svg.go); without it, --format svg exits 1 saying how to get the
// SVG (diagram_nosvg.go).
func runDiagram(args []string, env *environment) int {
	fs := newFlagSet("diagram", "agentfsm diagram [--format mermaid|dot|svg]")
	format := fs.String("format", "mermaid", "output `format`: mermaid, dot or svg (svg in a command built with -tags svg)")
	if code := fs.parse(args, env); code >= 0 {
		return code
	}
	rules := transitions.Table()
	var image []byte
	switch *format {
	case "mermaid":
		image = []byte(fsm.Mermaid(rules))
	case "dot":
		image = []byte(fsm.DOT(rules))
	case "svg":
		var err error
		if image, err = renderSVG(rules); err != nil {
			fmt.Fprintf(env.stderr, "agentfsm diagram: %v\n", err)
			return 1
		}
	default:
		fmt.Fprintf(env.stderr, "agentfsm diagram: unknown --format %q (want mermaid, dot or svg)\n", *format)
		return 2
	}
	if _, err := env.stdout.Write(image); err != nil {
		fmt.Fprintf(env.stderr, "agentfsm diagram: writing the diagram: %v\n", err)
		return 1
	}
	return 0
}
