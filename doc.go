// Package agentfsm is an explicit finite-state machine for an LLM agent
// session's auto-retry and context-compaction policy.
//
// The library lives in the subpackages: classify (what an error means),
// states and transitions (the machine's states and its guarded transition
// table, as data), fsm (the machine, run on github.com/looplab/fsm, and its
// diagrams). This root package holds only module-wide tests.
package agentfsm
