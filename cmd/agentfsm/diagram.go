package main

import (
	"context"
	"fmt"

	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/fsm/svg"
	"github.com/agentfsm/agentfsm/transitions"
)

func runDiagram(args []string, env *environment) int {
	fs := newFlagSet("diagram", "agentfsm diagram [--format mermaid|dot|svg]")
	format := fs.String("format", "mermaid", "output `format`: mermaid, dot or svg")
	if code := fs.parse(args, env); code >= 0 {
		return code
	}
	rules := transitions.Table()
	switch *format {
	case "mermaid":
		fmt.Fprint(env.stdout, fsm.Mermaid(rules))
	case "dot":
		fmt.Fprint(env.stdout, fsm.DOT(rules))
	case "svg":
		image, err := svg.Render(context.Background(), rules)
		if err != nil {
			fmt.Fprintf(env.stderr, "agentfsm diagram: %v\n", err)
			return 1
		}
		_, _ = env.stdout.Write(image)
	default:
		fmt.Fprintf(env.stderr, "agentfsm diagram: unknown --format %q (want mermaid, dot or svg)\n", *format)
		return 2
	}
	return 0
}
