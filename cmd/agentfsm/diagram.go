package main

import (
	"context"
	"fmt"

	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/fsm/svg"
	"github.com/agentfsm/agentfsm/transitions"
)

// runDiagram prints the state diagram in one write; exit 1, with a one-line
// reason, when the SVG cannot be drawn or stdout cannot take it.
func runDiagram(args []string, env *environment) int {
	fs := newFlagSet("diagram", "agentfsm diagram [--format mermaid|dot|svg]")
	format := fs.String("format", "mermaid", "output `format`: mermaid, dot or svg")
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
		if image, err = svg.Render(context.Background(), rules); err != nil {
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
