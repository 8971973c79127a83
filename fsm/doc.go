// Package fsm is the recovery machine: the transition table of package
// transitions, validated and run on github.com/looplab/fsm, and drawn as
// Mermaid and Graphviz DOT diagrams.
//
// A Machine holds one current state and moves only along the table's rules.
// It does not decide when to move or do the work a state stands for (waiting,
// compacting, calling the model): package policy's Engine decides, one input
// at a time, and a driver (package session) does the work.
// SVG rendering lives in package fsm/svg, so that programs which only run the
// machine do not carry a Graphviz build.
package fsm
