package policy_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/policy"
)

// renderEffects is what effects say, field by field, as text that holds
// no address: two engines fed the same inputs render the same.
func renderEffects(t *rapid.T, effects []policy.Effect) string {
	var out []byte
	for i := range effects {
		ef := effects[i]
		cause, err := ef.Cause, ef.Err
		ef.Cause, ef.Err = nil, nil
		b, jerr := json.Marshal(ef)
		if jerr != nil {
			t.Fatalf("effect %d does not render: %v", i, jerr)
		}
		out = fmt.Appendf(append(out, b...), " cause=%v err=%v\n", cause, err)
	}
	return string(out)
}

// What Release does to the pools of rooms never shows: an engine fed
// the same inputs answers with the same effects, and appends the same
// history, whether or not its driver releases (after any input, twice, or
// before any), and whatever another engine, fed in between in the same
// goroutine, does with its own rooms; and an input's effects stay as they
// came until its engine's next input or Release, whatever the other
// engine does meanwhile. The walk holds inputs that make more effects or
// entries than a room holds (a prompt that overflows, a compaction's), a
// failed append reported inside the driver's apply, and awaited appends.
func TestReleasedRoomsShowNowhere(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := policy.DefaultConfig()
		cfg.Retry.MaxRetries = rapid.IntRange(0, 3).Draw(t, "maxRetries")
		cfg.Retry.WaitForReset = rapid.Bool().Draw(t, "waitForReset")
		cfg.Compaction.KeepRecentTokens = rapid.SampledFrom([]int{5, 20000}).Draw(t, "keepRecentTokens")
		creds := rapid.Bool().Draw(t, "credentials")
		engine := func() *policy.Engine {
			e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: cfg, Credentials: creds})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		steps := rapid.IntRange(1, 30).Draw(t, "steps")

		// The reference: an engine whose driver never releases, alone.
		var picks []int
		var want []string
		ref := newWalker(engine(), nil, t0)
		ref.seen = func(effects []policy.Effect) { want = append(want, renderEffects(t, effects)) }
		var refErrs []string
		for i := range steps {
			err := ref.step(func(k int) int {
				p := rapid.IntRange(0, k-1).Draw(t, fmt.Sprint("pick", len(picks)))
				picks = append(picks, p)
				return p
			})
			refErrs = append(refErrs, fmt.Sprint(err))
			if err != nil {
				t.Logf("reference step %d: %v", i, err)
			}
		}

		// The same inputs to a, interleaved with another engine's, b,
		// each driver releasing at random.
		a := newWalker(engine(), nil, t0)
		b := newWalker(engine(), nil, t0)
		var (
			got      int
			last     []policy.Effect // a's last input's, unreleased
			lastText string
		)
		check := func(when string) {
			if last != nil && renderEffects(t, last) != lastText {
				t.Fatalf("a's last effects changed %s:\n%s\nwere\n%s", when, renderEffects(t, last), lastText)
			}
		}
		a.seen = func(effects []policy.Effect) {
			if got >= len(want) {
				t.Fatalf("a takes more inputs than the reference (%d)", len(want))
			}
			if text := renderEffects(t, effects); text != want[got] {
				t.Fatalf("a's input %d answers\n%s\nthe reference's\n%s", got, text, want[got])
			}
			last, lastText = effects, want[got]
			got++
		}
		release := func(name string, w *walker, own bool) func() {
			n := 0
			return func() {
				n++
				switch rapid.IntRange(0, 3).Draw(t, fmt.Sprint(name, " releases ", n)) {
				case 0:
					return // this driver never calls it here
				case 1:
					w.e.Release()
					w.e.Release()
				default:
					w.e.Release()
				}
				if own {
					last = nil
				}
			}
		}
		a.released = release("a", a, true)
		b.released = release("b", b, false)
		b.seen = func([]policy.Effect) { check("while b took an input") }
		if rapid.Bool().Draw(t, "a releases before any input") {
			a.e.Release()
		}
		bPicks := 0
		next := 0
		for i := range steps {
			for j := range rapid.IntRange(0, 2).Draw(t, fmt.Sprint("b steps before ", i)) {
				_ = b.step(func(k int) int {
					bPicks++
					return rapid.IntRange(0, k-1).Draw(t, fmt.Sprint("b pick", bPicks))
				})
				check(fmt.Sprintf("after b's step %d.%d", i, j))
			}
			err := a.step(func(int) int {
				if next >= len(picks) {
					t.Fatalf("a picks more than the reference did")
				}
				next++
				return picks[next-1]
			})
			if fmt.Sprint(err) != refErrs[i] {
				t.Fatalf("a's step %d ends %v, the reference's %s", i, err, refErrs[i])
			}
		}
		if got != len(want) {
			t.Fatalf("a took %d inputs, the reference %d", got, len(want))
		}
		ah, _ := json.Marshal(a.history)
		rh, _ := json.Marshal(ref.history)
		if string(ah) != string(rh) {
			t.Fatalf("a appended\n%s\nthe reference\n%s", ah, rh)
		}
	})
}

// An engine made on the history a live engine wrote puts every message of
// its runtime context where the live engine does (the positions the stale
// rule reads), whatever the live engine lived through: retries that
// remove the failed answer (the context's last message), compactions that
// drop it or keep it, an agent's IDs reused or taken.
func TestReplayedPositionsMatchTheLiveEngine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := policy.DefaultConfig()
		cfg.Retry.MaxRetries = rapid.IntRange(0, 3).Draw(t, "maxRetries")
		cfg.Compaction.KeepRecentTokens = rapid.SampledFrom([]int{5, 20000}).Draw(t, "keepRecentTokens")
		e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		w := newWalker(e, nil, t0)
		w.noFail = true
		n := 0
		pick := func(k int) int {
			n++
			return rapid.IntRange(0, k-1).Draw(t, fmt.Sprint("pick", n))
		}
		for i := range rapid.IntRange(1, 100).Draw(t, "steps") {
			_ = w.step(pick)
			if w.await || w.e.Status().Compacting {
				continue // a compaction's entry is written before it applies
			}
			r, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: cfg, History: w.history})
			if err != nil {
				t.Fatalf("step %d: the history does not open: %v", i, err)
			}
			lp, ln, lc := policy.Positions(w.e)
			rp, rn, rc := policy.Positions(r)
			if ln != rn || lc != rc || !slices.Equal(lp, rp) {
				t.Fatalf("step %d: the live engine has positions %v (entries %d, compaction %d), the one made on its history %v (%d, %d)", i, lp, ln, lc, rp, rn, rc)
			}
		}
	})
}
