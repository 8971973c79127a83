// Package states names the seven states of the recovery machine.
//
// A session is always in exactly one of them. The package exists so that the
// transition table, the machine, the session and the RPC layer share one
// spelling of each name; it holds no behaviour beyond naming, ordering and
// parsing. It is not the machine (see package fsm) nor the rules between
// states (see package transitions).
package states
