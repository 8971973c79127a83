package events_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// all is one value of every event type.
var all = []events.Event{
	events.AgentStart{}, events.CallStart{}, events.MessageStart{}, events.MessageUpdate{},
	events.MessageEnd{}, events.CallEnd{}, events.AgentEnd{}, events.AutoRetryStart{},
	events.AutoRetryEnd{Outcome: events.RetryRecovered}, events.AutoCompactionStart{}, events.AutoCompactionEnd{},
	events.StateChange{From: states.Idle, To: states.Classifying, Trigger: transitions.AgentEnd}, events.TurnSettled{}, events.EventsDropped{},
	events.ModelFallback{}, events.ModelRevert{}, events.SharedLimitWait{},
}

// eventTypes returns, by name, the doc comment of every type of the package
// that has the event method: the set Event admits.
func eventTypes(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "events.go", nil, parser.ParseComments)
	require.NoError(t, err)
	docs := map[string]string{}
	for _, decl := range f.Decls {
		if d, ok := decl.(*ast.GenDecl); ok && d.Tok == token.TYPE {
			for _, spec := range d.Specs {
				s := spec.(*ast.TypeSpec)
				docs[s.Name.Name] = strings.Join(strings.Fields(s.Doc.Text()), " ")
			}
		}
	}
	out := map[string]string{}
	for _, decl := range f.Decls {
		if d, ok := decl.(*ast.FuncDecl); ok && d.Recv != nil && d.Name.Name == "event" {
			name := d.Recv.List[0].Type.(*ast.Ident).Name
			out[name] = docs[name]
		}
	}
	return out
}

// snake is name in snake case: AutoRetryStart is auto_retry_start.
func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

var wireName = regexp.MustCompile(`On the RPC wire it is "([a-z_]+)"`)

// TestWireNames: Event's doc promises that each event's name on the RPC
// wire is its Go name in snake case, but where its doc names another (the
// reference's "turn_start" and "turn_end" for CallStart and CallEnd); that
// session/rpc writes that name as the line's "type"; and that the set is
// the package's types with the event method, every one of them listed here.
func TestWireNames(t *testing.T) {
	types := eventTypes(t)
	listed := map[string]bool{}
	for _, ev := range all {
		listed[reflect.TypeOf(ev).Name()] = true
	}
	for name := range types {
		assert.True(t, listed[name], "event type %s is not in the test's list", name)
	}
	assert.Len(t, all, len(types), "every listed value is an event type of the package")
	seen := map[string]string{}
	for _, ev := range all {
		name := reflect.TypeOf(ev).Name()
		want := snake(name)
		if m := wireName.FindStringSubmatch(types[name]); m != nil {
			want = m[1]
		}
		assert.Equal(t, want, rpc.EventType(ev), "the wire name of %s", name)
		if other, dup := seen[want]; dup {
			t.Errorf("%s and %s share the wire name %q", other, name, want)
		}
		seen[want] = name
		line, err := rpc.MarshalEvent(ev)
		require.NoError(t, err, name)
		var head struct{ Type string }
		require.NoError(t, json.Unmarshal(line, &head), name)
		assert.Equal(t, want, head.Type, "the type session/rpc writes for %s", name)
	}

	assert.Equal(t, "turn_end", rpc.EventType(events.CallEnd{}), "CallEnd's documented wire name")
}

// TestRetryOutcomesOnTheWire: an AutoRetryEnd's Outcome is written as the
// value its constant names.
func TestRetryOutcomesOnTheWire(t *testing.T) {
	for _, o := range []events.RetryOutcome{events.RetryRecovered, events.RetryExhausted, events.RetryCancelled, events.RetryFailed} {
		line, err := rpc.MarshalEvent(events.AutoRetryEnd{Outcome: o})
		require.NoError(t, err)
		var got struct{ Outcome string }
		require.NoError(t, json.Unmarshal(line, &got))
		assert.Equal(t, string(o), got.Outcome)
	}
}
