package transitions

// Signals returns every signal in declaration order.
func Signals() []Signal {
	out := make([]Signal, len(signalNames))
	for i := range out {
		out[i] = Signal(i)
	}
	return out
}
