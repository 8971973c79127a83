package fsm

import (
	"context"
	"fmt"
	"slices"
	"sync"

	looplab "github.com/looplab/fsm"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// Machine is the recovery machine: a current state and the rules it may take.
// It starts in states.Idle. A Machine is safe for concurrent use; each Step
// is atomic. The zero value is not usable: call New or Default (its State
// is "", and its Step fails with ErrNotBuilt).
//
// The current state lives in the Machine and nowhere else; every move
// between two states is checked by a looplab machine built from the same
// rules, set to the current state for that move and then to the
// destination. Machines on the same rules share one looplab machine (a
// session waiting out a backoff holds a few words, not a looplab machine of
// its own; docs/policy.md §5 gives the figures).
type Machine struct {
	mu sync.Mutex
	// at is the current state, with the moves that leave it.
	at  *node
	eng *engine
}

// node is one state of a table: the rules that leave it, in table order,
// each with the Transition taking it makes, so that Step tries only those
// and builds nothing, and the error of an input none of them takes.
type node struct {
	state  states.State
	moves  []move
	noRule *TransitionError
}

// engine is a looplab machine on a validated table, shared by the Machines
// built on it: each move sets it to the mover's state, asks it whether the
// trigger may be taken there (Can) and sets it to the destination
// (SetState), under its own lock. It never runs looplab's Event, whose
// callback machinery this table has no use for (docs/policy.md §5).
type engine struct {
	mu    sync.Mutex
	lf    *looplab.FSM
	rules transitions.Rules
	// nodes holds every state's node.
	nodes map[states.State]*node
	// to is, for each trigger handed to looplab, its destination: the Dst
	// looplab was given, which it does not let be read back.
	to map[transitions.Trigger]states.State
}

// move is one rule as Step takes it from one source state.
type move struct {
	holds func(states.State, *transitions.Facts) bool
	tr    Transition
	to    *node
}

// New validates rules and builds a Machine on them, starting in states.Idle.
// The table must name only known states, give every rule at least one source
// state, a named guard, a unique trigger and known actions, and let every
// state be reached from idle and reach idle. A rule may lead a state to
// itself (an internal rule: its actions happen and the state stays). A table
// that breaks a rule yields an error wrapping ErrInvalidTable that names the
// offending rule or state.
func New(rules []transitions.Rule) (*Machine, error) {
	if err := Validate(rules); err != nil {
		return nil, err
	}
	eng := build(cloneRules(rules))
	return &Machine{at: eng.nodes[states.Idle], eng: eng}, nil
}

// build makes the looplab machine on rules it may keep: validated, and
// never changed after. Internal rules have no looplab event: they never
// move it.
func build(rules transitions.Rules) *engine {
	descs := looplabEvents(rules)
	to := make(map[transitions.Trigger]states.State, len(descs))
	for _, ev := range descs {
		to[transitions.Trigger(ev.Name)] = states.State(ev.Dst)
	}
	nodes := map[states.State]*node{}
	for _, s := range states.All() {
		nodes[s] = &node{state: s, noRule: &TransitionError{State: s, Err: ErrNoRule}}
	}
	for _, r := range rules {
		for _, from := range r.From {
			tr := Transition{From: from, To: r.Target(from), Trigger: r.Trigger, Guard: r.Guard.Name, Actions: r.Actions}
			for _, a := range r.Actions {
				tr.Indexes = append(tr.Indexes, a.Index())
			}
			if !tr.Internal() {
				tr.Change = events.StateChange{From: tr.From, To: tr.To, Trigger: tr.Trigger}
			}
			n := nodes[from]
			n.moves = append(n.moves, move{holds: r.Guard.Holds, tr: tr, to: nodes[tr.To]})
		}
	}
	return &engine{lf: looplab.NewFSM(string(states.Idle), descs, nil), rules: rules, nodes: nodes, to: to}
}

// looplabEvents is rules as looplab's events: each rule's event from the
// sources it leaves (not those where it is internal) to its destination.
func looplabEvents(rules transitions.Rules) looplab.Events {
	events := make(looplab.Events, 0, len(rules))
	for _, r := range rules {
		var src []string
		for _, s := range r.From {
			if !r.Internal(s) {
				src = append(src, string(s))
			}
		}
		if len(src) > 0 {
			events = append(events, looplab.EventDesc{Name: string(r.Trigger), Src: src, Dst: string(r.To)})
		}
	}
	return events
}

// defaultEngine is on transitions.Table(), validated once and shared by
// every machine Default builds.
var defaultEngine = func() *engine {
	rules := transitions.Table()
	if err := Validate(rules); err != nil {
		// The table is a constant of this module and its tests validate it.
		panic(err)
	}
	return build(rules)
}()

// Default returns a Machine on transitions.Table(), in states.Idle.
func Default() *Machine { return &Machine{at: defaultEngine.nodes[states.Idle], eng: defaultEngine} }

// DefaultIn returns a Machine on transitions.Table() in state s, as a
// machine restored from a snapshot is. s must be a state the table has.
func DefaultIn(s states.State) (*Machine, error) {
	n, ok := defaultEngine.nodes[s]
	if !ok {
		return nil, fmt.Errorf("fsm: unknown state %q", s)
	}
	return &Machine{at: n, eng: defaultEngine}, nil
}

// State returns the current state.
func (m *Machine) State() states.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		return "" // a zero Machine
	}
	return m.at.state
}

// Transition records one rule the machine took. The one Step returns is
// the machine's own, shared by every Machine on the same table (every
// Default machine of the process), as are its slices: changing any of it
// changes the moves of all of them. A caller that wants a changed one
// copies it and clones its slices.
type Transition struct {
	From    states.State
	To      states.State
	Trigger transitions.Trigger
	// Guard is the name of the guard that admitted the rule.
	Guard string
	// Actions are the rule's actions, in order. They are the table's
	// own: do not change them.
	Actions []transitions.Action
	// Indexes are the positions of Actions in transitions.Actions()
	// (Action.Index), made once when the machine is built, for a package
	// that carries the actions out by position. Shared as Actions are: do
	// not change them.
	Indexes []int
	// Change is the events.StateChange the move reports, made once when
	// the machine is built, so that reporting it allocates nothing; nil
	// for an internal rule, which changes no state.
	Change events.Event
}

// Internal reports whether the rule left the state as it was.
func (t Transition) Internal() bool { return t.From == t.To }

// Step picks the rule that applies in the current state with facts f
// (the machine's table's Next) and takes it. It returns the
// rule taken (the machine's own Transition, made when it was built: do not
// change it), or a *TransitionError wrapping ErrNoRule when no rule applies, in
// which case the state is unchanged. That error is made once for each state
// and returned as is every time, so that an input no rule takes costs no
// allocation: do not change it. An internal rule changes no state and does
// not involve looplab. A move looplab does not allow from the current
// state is refused (ErrNotAllowed or ErrUnknownEvent), whatever the rule
// says, and the state is unchanged.
//
// f must not be nil: nil facts are refused with ErrNoFacts, the state
// unchanged. A zero Machine refuses every step with ErrNotBuilt.
//
// ctx never reaches looplab: a move asks looplab's Can and sets its state,
// which take no context (a cancelled one handed to looplab's Event would
// leave it stuck mid-transition for good). A cancelled ctx still moves the
// machine; cancellation is the caller's to turn into the cancel trigger.
func (m *Machine) Step(ctx context.Context, f *transitions.Facts) (*Transition, error) {
	if f == nil {
		return nil, ErrNoFacts
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	at := m.at
	if at == nil {
		return nil, ErrNotBuilt
	}
	// The rule the table's Next picks: the first, in table order, that
	// leaves the current state and whose guard holds.
	for i := range at.moves {
		mv := &at.moves[i]
		if !mv.holds(at.state, f) {
			continue
		}
		if mv.tr.Internal() {
			return &mv.tr, nil
		}
		if err := m.move(mv.tr.Trigger, mv.to); err != nil {
			return nil, err
		}
		return &mv.tr, nil
	}
	return nil, at.noRule
}

// fire takes the rule of trigger t from the current state, without
// evaluating its guard; the caller holds m.mu. It returns a
// *TransitionError wrapping ErrUnknownEvent or ErrNotAllowed when the trigger
// cannot be taken, and the state is then unchanged. ctx never reaches
// looplab (see Step); it is accepted for the callers that have one.
func (m *Machine) fire(_ context.Context, t transitions.Trigger) error {
	return m.move(t, m.eng.nodes[m.eng.to[t]])
}

// move takes trigger t from the current state to `to` on the shared looplab
// machine, the caller holding m.mu: set to the current state, looplab
// says whether t leaves it (Can: its own table of moves, consulted
// whatever the rules say) and is set to the destination. It allocates
// nothing. A refusal is a *TransitionError wrapping ErrNotAllowed (the
// trigger leaves some other state) or ErrUnknownEvent (it leaves none), with
// the looplab error its Event would have returned as the Cause.
func (m *Machine) move(t transitions.Trigger, to *node) error {
	from := m.at.state
	e := m.eng
	e.mu.Lock()
	e.lf.SetState(string(from))
	ok := e.lf.Can(string(t))
	if ok {
		e.lf.SetState(string(to.state))
	}
	e.mu.Unlock()
	if ok {
		m.at = to
		return nil
	}
	if _, known := e.to[t]; known {
		return &TransitionError{Trigger: t, State: from, Err: ErrNotAllowed,
			Cause: looplab.InvalidEventError{Event: string(t), State: string(from)}}
	}
	return &TransitionError{Trigger: t, State: from, Err: ErrUnknownEvent,
		Cause: looplab.UnknownEventError{Event: string(t)}}
}

// Validate checks a table against the structural rules New enforces.
func Validate(rules []transitions.Rule) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidTable}, args...)...)
	}
	if len(rules) == 0 {
		return bad("no rules")
	}
	seen := map[transitions.Trigger]bool{}
	edges := map[states.State][]states.State{}
	for i, r := range rules {
		switch {
		case r.Trigger == "":
			return bad("rule %d has no trigger", i)
		case seen[r.Trigger]:
			return bad("trigger %q appears twice", r.Trigger)
		case len(r.From) == 0:
			return bad("trigger %q has no source state", r.Trigger)
		case r.To != transitions.Stay && !r.To.Valid():
			return bad("trigger %q leads to unknown state %q", r.Trigger, r.To)
		case r.Guard.Name == "" || r.Guard.Holds == nil:
			return bad("trigger %q has no named guard", r.Trigger)
		}
		for _, a := range r.Actions {
			if a.Doc() == "" {
				return bad("trigger %q has unknown action %q", r.Trigger, a)
			}
		}
		seen[r.Trigger] = true
		for _, from := range r.From {
			switch {
			case !from.Valid():
				return bad("trigger %q leaves unknown state %q", r.Trigger, from)
			case countFrom(r.From, from) > 1:
				return bad("trigger %q lists state %q twice", r.Trigger, from)
			}
			if !r.Internal(from) {
				edges[from] = append(edges[from], r.To)
			}
		}
	}
	reach := func(start states.State, next func(states.State) []states.State) map[states.State]bool {
		seen := map[states.State]bool{start: true}
		queue := []states.State{start}
		for len(queue) > 0 {
			s := queue[0]
			queue = queue[1:]
			for _, n := range next(s) {
				if !seen[n] {
					seen[n] = true
					queue = append(queue, n)
				}
			}
		}
		return seen
	}
	fromIdle := reach(states.Idle, func(s states.State) []states.State { return edges[s] })
	toIdle := reach(states.Idle, func(s states.State) []states.State {
		var preds []states.State
		for _, from := range states.All() {
			if slices.Contains(edges[from], s) {
				preds = append(preds, from)
			}
		}
		return preds
	})
	for _, s := range states.All() {
		if !fromIdle[s] {
			return bad("state %q cannot be reached from idle", s)
		}
		if !toIdle[s] {
			return bad("state %q cannot reach idle", s)
		}
	}
	return nil
}

func countFrom(from []states.State, s states.State) int {
	n := 0
	for _, f := range from {
		if f == s {
			n++
		}
	}
	return n
}

func cloneRules(rules transitions.Rules) transitions.Rules {
	out := make(transitions.Rules, len(rules))
	for i, r := range rules {
		r.From = slices.Clone(r.From)
		r.Actions = slices.Clone(r.Actions)
		out[i] = r
	}
	return out
}
