package transitions

import "github.com/agentfsm/agentfsm/classify"

// Signals returns every signal in declaration order.
func Signals() []Signal {
	out := make([]Signal, len(signalNames))
	for i := range out {
		out[i] = Signal(i)
	}
	return out
}

// Classes returns the five classes of classify in declaration order.
func Classes() []classify.Class {
	var out []classify.Class
	for c := classify.None; c.Valid(); c++ {
		out = append(out, c)
	}
	return out
}
