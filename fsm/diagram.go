package fsm

import (
	"fmt"
	"strings"

	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// Mermaid renders rules as a Mermaid stateDiagram-v2: idle as the start, one
// edge per (source state, rule) labelled "event [guard]", in table order, and
// the pass-through states drawn dashed. The output is deterministic: the same
// rules always give the same bytes.
func Mermaid(rules []transitions.Rule) string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	b.WriteString("    direction LR\n")
	fmt.Fprintf(&b, "    [*] --> %s\n", states.Idle)
	for _, r := range rules {
		for _, from := range r.From {
			fmt.Fprintf(&b, "    %s --> %s: %s [%s]\n", from, r.To, r.Event, r.Guard.Name)
		}
	}
	var pass []string
	for _, s := range states.All() {
		if s.PassThrough() {
			pass = append(pass, string(s))
		}
	}
	b.WriteString("    classDef passThrough stroke-dasharray: 5 5\n")
	fmt.Fprintf(&b, "    class %s passThrough\n", strings.Join(pass, ", "))
	return b.String()
}

// DOT renders rules as a Graphviz digraph with the same content as Mermaid:
// a start point into idle, every state in states.All order (pass-through
// states dashed), one edge per (source state, rule) labelled with the event
// and, below it, the guard. The output is deterministic.
func DOT(rules []transitions.Rule) string {
	var b strings.Builder
	b.WriteString("digraph agentfsm {\n")
	b.WriteString("\trankdir=LR;\n")
	b.WriteString("\tnode [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=12];\n")
	b.WriteString("\tedge [fontname=\"Helvetica\", fontsize=10];\n")
	b.WriteString("\t__start [shape=point, label=\"\"];\n")
	for _, s := range states.All() {
		if s.PassThrough() {
			fmt.Fprintf(&b, "\t%s [style=\"rounded,dashed\"];\n", s)
		} else {
			fmt.Fprintf(&b, "\t%s;\n", s)
		}
	}
	fmt.Fprintf(&b, "\t__start -> %s;\n", states.Idle)
	for _, r := range rules {
		for _, from := range r.From {
			fmt.Fprintf(&b, "\t%s -> %s [label=\"%s\\n[%s]\"];\n", from, r.To, r.Event, r.Guard.Name)
		}
	}
	b.WriteString("}\n")
	return b.String()
}
