// Package props holds the property-based and exhaustive tests of the
// policy's invariants (docs/policy.md §9), written with pgregory.net/rapid: a
// model-based test that drives a real session on the scripted agent in fake
// time against a reference model kept from the transition table and the
// policy, a breadth-first walk of the table whose every edge is replayed on
// a real session, and the classifier's properties against an oracle.
//
// It has no code of its own besides its tests; docs/testing.md explains
// how the suite is built and how to run it longer.
package props
