package states

import "fmt"

// State is the name of one state of the recovery machine. The zero value is
// not a valid state; use one of the constants.
type State string

// The seven states, in the order diagrams draw them.
const (
	// Idle: no recovery is in progress. A user's run may be in flight.
	Idle State = "idle"
	// Classifying: a run just ended and the decision at agent_end is being made.
	Classifying State = "classifying"
	// Backoff: a retry is scheduled; its delay is being waited out.
	Backoff State = "backoff"
	// Continuing: a continuation run (after a retry or an overflow
	// compaction) is in flight.
	Continuing State = "continuing"
	// Compacting: a compaction is in flight.
	Compacting State = "compacting"
	// Exhausted: a chain ran out of retries. It passes straight on to Idle.
	Exhausted State = "exhausted"
	// Cancelled: a chain or a compaction was aborted. It passes straight on
	// to Idle.
	Cancelled State = "cancelled"
)

var all = [...]State{Idle, Classifying, Backoff, Continuing, Compacting, Exhausted, Cancelled}

// All returns the seven states in diagram order. The slice is a fresh copy.
func All() []State {
	out := make([]State, len(all))
	copy(out, all[:])
	return out
}

// Valid reports whether s is one of the seven states.
func (s State) Valid() bool {
	for _, v := range all {
		if s == v {
			return true
		}
	}
	return false
}

// PassThrough reports whether s is a state the machine leaves at once for
// Idle (Exhausted and Cancelled): it records how a chain ended and is never
// where a session rests.
func (s State) PassThrough() bool { return s == Exhausted || s == Cancelled }

// String returns the state's name.
func (s State) String() string { return string(s) }

// Parse returns the state named name, or an error naming the unknown value.
func Parse(name string) (State, error) {
	s := State(name)
	if !s.Valid() {
		return "", fmt.Errorf("states: unknown state %q", name)
	}
	return s, nil
}

// MarshalText implements encoding.TextMarshaler. It refuses a State that is
// not one of the seven, so an invalid value never reaches the wire.
func (s State) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("states: unknown state %q", string(s))
	}
	return []byte(s), nil
}

// UnmarshalText implements encoding.TextUnmarshaler. It rejects unknown
// names and leaves s unchanged when it does.
func (s *State) UnmarshalText(text []byte) error {
	v, err := Parse(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
