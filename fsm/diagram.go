package fsm

import (
	"fmt"
	"strings"

	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// Mermaid renders rules as a Mermaid stateDiagram-v2: idle as the start, one
// edge per (source state, rule) labelled "trigger [guard] / action, action",
// in table order (an internal rule is an edge from its state to itself),
// and the pass-through states drawn dashed. The output is deterministic: the
// same rules always give the same bytes.
func Mermaid(rules []transitions.Rule) string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	b.WriteString("    direction LR\n")
	fmt.Fprintf(&b, "    [*] --> %s\n", states.Idle)
	for _, r := range rules {
		for _, from := range r.From {
			fmt.Fprintf(&b, "    %s --> %s: %s\n", from, r.Target(from), Label(r, " "))
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
// states dashed), one edge per (source state, rule) labelled with the trigger,
// below it the guard, and below that the actions. The output is
// deterministic.
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
			fmt.Fprintf(&b, "\t%s -> %s [label=\"%s\"];\n", from, r.Target(from), Label(r, "\\n"))
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// Label is a rule's edge label: "trigger [guard] / action, action", with sep
// between the trigger, the guard and the actions ("/ …" left out for a rule
// without actions).
func Label(r transitions.Rule, sep string) string {
	l := fmt.Sprintf("%s%s[%s]", r.Trigger, sep, r.Guard.Name)
	if len(r.Actions) == 0 {
		return l
	}
	acts := make([]string, len(r.Actions))
	for i, a := range r.Actions {
		acts[i] = string(a)
	}
	return l + sep + "/ " + strings.Join(acts, ", ")
}
