package policy

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/transitions"
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

// TestNestedTakeLeavesTheOuterFacts: a take inside another (which no action
// does today: actions raise steps) reads a copy of its own facts, and the
// outer take's guards go on reading theirs.
func TestNestedTakeLeavesTheOuterFacts(t *testing.T) {
	e, err := New(Setup{SessionID: "s", Model: Model{ID: "m", Provider: "p"}, Config: DefaultConfig()})
	assert.NoError(t, err)
	e.begin()
	sc := e.work()
	outer := transitions.Facts{Signal: transitions.TimerFired, CurrentTimer: true}
	sc.taking, sc.facts = true, outer
	took := e.take(&step{facts: transitions.Facts{Signal: transitions.AbortCalled}})
	assert.True(t, took, "abort applies in idle: the nested take took its rule")
	assert.Equal(t, outer, sc.facts, "the outer take's facts are as they were")
	assert.True(t, sc.taking, "the outer take is still in progress")
	sc.taking = false
	e.Release()
}
