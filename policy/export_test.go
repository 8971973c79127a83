package policy

// EffectKinds returns every kind of effect, in declaration order.
func EffectKinds() []EffectKind {
	out := make([]EffectKind, 0, len(effectNames)-1)
	for k := Emit; int(k) < len(effectNames); k++ {
		out = append(out, k)
	}
	return out
}

// Positions returns where each message of the engine's runtime context is
// in history, as the stale rule reads it, nil while no position counts
// (no map), with the count of entries and the latest compaction's position.
func Positions(e *Engine) (pos []int, next, compaction int) {
	c := &e.ctx
	if c.seq != nil {
		for _, m := range c.msgs {
			pos = append(pos, c.position(m.ID))
		}
	}
	return pos, c.nextSeq, c.compactionSeq
}

// Room returns the whole room of the engine's effects: its last input's
// effects and the room past them, which a driver's slice (capped at its
// length) does not reach; nil once released.
func Room(e *Engine) []Effect {
	if e.sc == nil {
		return nil
	}
	return e.sc.out[:cap(e.sc.out)]
}
