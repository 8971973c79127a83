package policy

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/transcript"
)

// TestEffectClearZeroesEveryField: Effect.clear zeroes an effect whatever
// field is set besides Kind and Event, each of them alone, so that a field
// added to Effect and missed by clear's shortcut leaves no value in the
// room (where the next input's effects are written field by field).
func TestEffectClearZeroesEveryField(t *testing.T) {
	typ := reflect.TypeFor[Effect]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "Kind" || f.Name == "Event" {
			continue
		}
		for _, v := range nonZero(t, f) {
			ef := Effect{Kind: Emit, Event: events.AgentStart{}}
			reflect.ValueOf(&ef).Elem().Field(i).Set(v)
			ef.clear()
			assert.True(t, reflect.ValueOf(ef).IsZero(), "an effect with %s set (%v) is not zero once cleared: %+v", f.Name, v, ef)
		}
	}
	ef := Effect{Kind: Emit, Event: events.AgentStart{}}
	ef.clear()
	assert.True(t, reflect.ValueOf(ef).IsZero(), "an event's effect")
}

// nonZero returns values of f's type that are not its zero value.
func nonZero(t *testing.T, f reflect.StructField) []reflect.Value {
	switch ft := f.Type; {
	case ft == reflect.TypeFor[time.Time]():
		// The zero instant in a location is not the zero Time.
		return []reflect.Value{reflect.ValueOf(time.Unix(1, 0)), reflect.ValueOf(time.Time{}.In(time.FixedZone("X", 3600)))}
	case ft.Kind() == reflect.Struct:
		// Each of its fields set alone.
		var out []reflect.Value
		for i := range ft.NumField() {
			for _, v := range nonZero(t, ft.Field(i)) {
				s := reflect.New(ft).Elem()
				s.Field(i).Set(v)
				out = append(out, s)
			}
		}
		return out
	case ft.Kind() == reflect.String:
		return []reflect.Value{reflect.ValueOf("x").Convert(ft)}
	case ft.Kind() == reflect.Pointer:
		return []reflect.Value{reflect.New(ft.Elem())}
	case ft.Kind() == reflect.Slice:
		// Empty but not nil.
		return []reflect.Value{reflect.MakeSlice(ft, 0, 1)}
	case ft.Kind() == reflect.Interface:
		return []reflect.Value{reflect.ValueOf(errors.New("x"))}
	case ft.Kind() == reflect.Bool:
		return []reflect.Value{reflect.ValueOf(true).Convert(ft)}
	case ft.Kind() >= reflect.Int && ft.Kind() <= reflect.Uint64:
		return []reflect.Value{reflect.ValueOf(1).Convert(ft)}
	}
	t.Fatalf("Effect.%s is of a type this test sets no value of: %s", f.Name, f.Type)
	return nil
}

// TestDriverWritingIntoEffectsReachesNoInput: a driver that writes into
// the effects it was handed, any field of any of them (Kind and Event
// included, an event's effect given a field of another kind), and then
// releases them, changes nothing of what the next input makes: of the same
// engine, or of another whose scratch is the one released. Each is
// compared with an engine fed the same inputs by a driver that wrote
// nothing.
func TestDriverWritingIntoEffectsReachesNoInput(t *testing.T) {
	model := Model{Provider: "p", ID: "m", ContextWindow: 200000}
	at := time.Unix(1000, 0)
	engine := func() *Engine {
		e, err := New(Setup{SessionID: "s", Model: model, Config: DefaultConfig()})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// inputs feeds e a prompt and its run's first events, calling write
	// on the effects of each input before releasing them, and returns the
	// effects of every input, each as it came.
	inputs := func(e *Engine, write func([]Effect)) [][]Effect {
		var all [][]Effect
		// kept is effects as they came: their entries are in a room the
		// release empties.
		kept := func(effects []Effect) []Effect {
			out := slices.Clone(effects)
			for i := range out {
				out[i].Entries = slices.Clone(out[i].Entries)
			}
			return out
		}
		effects, err := e.Prompt(at, "hi")
		if err != nil {
			t.Fatal(err)
		}
		var run RunID
		for _, ef := range effects {
			if ef.Kind == StartRun {
				run = ef.Run
			}
		}
		all = append(all, kept(effects))
		write(effects)
		e.Release()
		failure := transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError, ErrorMessage: "503 Service Unavailable", Provider: "p", Model: "m", Timestamp: at.UnixMilli()}
		for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: failure}, events.MessageEnd{Message: failure}, events.AgentEnd{}} {
			effects = e.RunEvent(at, run, ev)
			all = append(all, kept(effects))
			write(effects)
			e.Release()
		}
		// A retry decided on: a timer, the history's entries, events.
		effects = e.RunReturned(at, run, RunReturn{Draw: 0.5})
		all = append(all, kept(effects))
		write(effects)
		e.Release()
		return all
	}
	want := inputs(engine(), func([]Effect) {})
	typ := reflect.TypeFor[Effect]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		values := nonZero(t, f)
		if f.Name == "Event" {
			values = []reflect.Value{reflect.ValueOf(events.AgentEnd{})}
		}
		for _, v := range values {
			write := func(effects []Effect) {
				for j := range effects {
					reflect.ValueOf(&effects[j]).Elem().Field(i).Set(v)
				}
			}
			// Again and again: under the race detector the pool drops
			// some of what it is given.
			for range 8 {
				if got := inputs(engine(), write); !reflect.DeepEqual(got, want) {
					t.Fatalf("the same engine, after a driver wrote %s = %v into its effects: %+v, want %+v", f.Name, v, got, want)
				}
				if got := inputs(engine(), func([]Effect) {}); !reflect.DeepEqual(got, want) {
					t.Fatalf("another engine, after a driver wrote %s = %v into the effects of one: %+v, want %+v", f.Name, v, got, want)
				}
			}
		}
	}
}

// TestReleaseForgetsATakeCutShort: an action that panics leaves the take
// it ran in marked as in progress; Release clears the mark, so that the
// scratch's next input, of any engine, reads its facts in the scratch as
// ever rather than each take copying them.
func TestReleaseForgetsATakeCutShort(t *testing.T) {
	e, err := New(Setup{SessionID: "s", Model: Model{ID: "m", Provider: "p"}, Config: DefaultConfig()})
	require.NoError(t, err)
	e.begin()
	sc := e.work()
	sc.taking = true // as a panic in an action leaves it
	e.Release()
	assert.False(t, sc.taking, "the released scratch has no take in progress")
}

// TestReleaseKeepsNothingOfALargeInput: an input whose effects outgrew
// their room (an overflow's decision makes eight) is released whole: the
// scratch goes back to the pool with its room, all of it zero, and no
// larger array holding the input's events, messages or errors.
func TestReleaseKeepsNothingOfALargeInput(t *testing.T) {
	e, err := New(Setup{SessionID: "s", Model: Model{Provider: "p", ID: "m", ContextWindow: 1000}, Config: DefaultConfig(), Recovery: true})
	require.NoError(t, err)
	at := time.Unix(1_700_000_000, 0)
	run, _ := promptRun(t, e, at, "hi")
	effects := answerRun(e, at, run, transcript.Message{ID: "err", Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError,
		ErrorMessage: "prompt is too long: 5000 tokens > 1000 maximum"})
	sc := e.sc
	require.Greater(t, len(effects), effectRoom, "the input outgrew its room")
	e.Release()
	assert.Zero(t, len(sc.out))
	assert.Equal(t, effectRoom, cap(sc.out), "the released scratch writes the next input's effects in its room")
	assert.True(t, reflect.ValueOf(sc.effects).IsZero(), "the room holds nothing of the released input")
	assert.True(t, reflect.ValueOf(sc.entryRoom).IsZero())
}
