package policy

// EffectKinds returns every kind of effect, in declaration order.
func EffectKinds() []EffectKind {
	out := make([]EffectKind, 0, len(effectNames)-1)
	for k := Emit; int(k) < len(effectNames); k++ {
		out = append(out, k)
	}
	return out
}
