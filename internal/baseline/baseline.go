// Package baseline is the yardstick the engine's costs are measured
// against in the same run (docs/performance.md): one bare looplab Event on
// a two-state machine. A ratio to it holds on a shared machine where an
// absolute time does not. It serves tests and benchmarks only.
package baseline

import (
	"context"

	looplab "github.com/looplab/fsm"
)

// LooplabEvent returns a function that takes one bare looplab Event each
// call, back and forth between two states. It is not safe for concurrent
// use.
func LooplabEvent() func() error {
	m := looplab.NewFSM("a", looplab.Events{
		{Name: "go", Src: []string{"a"}, Dst: "b"},
		{Name: "back", Src: []string{"b"}, Dst: "a"},
	}, nil)
	ctx := context.Background()
	events := [2]string{"go", "back"}
	i := 0
	return func() error {
		err := m.Event(ctx, events[i&1])
		i++
		return err
	}
}
