package session_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/session"
)

// allEvents holds one value of each event type.
var allEvents = []events.Event{
	events.AgentStart{}, events.CallStart{}, events.MessageStart{}, events.MessageEnd{}, events.CallEnd{},
	events.AgentEnd{}, events.AutoRetryStart{}, events.AutoRetryEnd{}, events.AutoCompactionStart{},
	events.AutoCompactionEnd{}, events.StateChange{}, events.TurnSettled{}, events.EventsDropped{},
	events.ModelFallback{}, events.ModelRevert{}, events.SharedLimitWait{},
}

// TestEventsArePlainValues: events are plain Go values, with no method and
// no JSON of their own (package session/rpc gives them their wire form),
// and Event is closed to the package's own types: its one method is
// unexported. Issue item 5.
func TestEventsArePlainValues(t *testing.T) {
	iface := reflect.TypeFor[events.Event]()
	for i := range iface.NumMethod() {
		assert.False(t, iface.Method(i).IsExported(), "Event has exported method %s", iface.Method(i).Name)
	}
	marshaler := reflect.TypeFor[json.Marshaler]()
	for _, ev := range allEvents {
		typ := reflect.TypeOf(ev)
		assert.Zero(t, typ.NumMethod(), "%s has exported methods", typ.Name())
		assert.False(t, typ.Implements(marshaler), "%s has a JSON form of its own", typ.Name())
		assert.False(t, reflect.PointerTo(typ).Implements(marshaler), "*%s has a JSON form of its own", typ.Name())
	}
}

// TestSubscribeOptionIsOpaque: SubscribeOption exposes no unexported type
// (it used to be a func(*subscriber)). Issue item 5.
func TestSubscribeOptionIsOpaque(t *testing.T) {
	typ := reflect.TypeFor[session.SubscribeOption]()
	assert.NotEqual(t, reflect.Func, typ.Kind(), "SubscribeOption is a function type")
	if typ.Kind() == reflect.Struct {
		for i := range typ.NumField() {
			assert.False(t, typ.Field(i).IsExported(), "SubscribeOption has exported field %s", typ.Field(i).Name)
		}
	}
	// The options still work: a bounded subscriber that falls behind is
	// told what it lost (see TestBoundedSubscriberIsToldWhatItLost).
	var zero session.SubscribeOption
	assert.NotEqual(t, zero, session.WithBuffer(2), "WithBuffer is not the zero option")
}
