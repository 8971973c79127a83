package fsm

import (
	"context"

	"github.com/agentfsm/agentfsm/transitions"
)

// For the tests of package fsm_test: the machine's moves without guards.

// Rules returns a copy of the machine's table.
func (m *Machine) Rules() []transitions.Rule { return cloneRules(m.eng.rules) }

// Can reports whether trigger t leaves the current state (ignoring guards).
func (m *Machine) Can(t transitions.Trigger) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.eng.mu.Lock()
	defer m.eng.mu.Unlock()
	m.eng.lf.SetState(string(m.at.state))
	return m.eng.lf.Can(string(t))
}

// Fire takes the rule of trigger t from the current state, without
// evaluating its guard, as Step does once it has picked the rule.
func (m *Machine) Fire(ctx context.Context, t transitions.Trigger) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fire(ctx, t)
}
