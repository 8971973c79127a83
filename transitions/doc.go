// Package transitions is the recovery policy as data: the guarded transition
// table of the state machine, the Facts its guards read, and Next, which picks
// the one rule that applies.
//
// Everything here is pure: no clock, no I/O, no goroutines. The machine
// (package fsm), the diagrams and the documentation are all built from
// Table, so none of them can disagree with the policy that runs. This package
// does not hold a current state or apply a rule; package fsm does.
package transitions
