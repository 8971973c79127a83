package transcript

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestUnderRuleSeesEveryField: Clean's shortcut (underRule) sees text that
// is not under the rule in every field Clean cleans: each string field of a
// message and of a block, set alone to invalid UTF-8, a header's key or
// value, a cost that is not finite, and arguments Clean rewrites. A field
// added to Message or Block fails the test until it is placed.
func TestUnderRuleSeesEveryField(t *testing.T) {
	valid := func() Message {
		return Message{ID: "m", Role: RoleAssistant, Content: []Block{{Type: BlockToolCall, ID: "c", Name: "n", Arguments: json.RawMessage(`{"a":"b"}`)}},
			StopReason: StopReasonStop, Provider: "p", Model: "x", Headers: map[string]string{"k": "v"},
			Usage: &Usage{Cost: &Cost{Input: 1}}}
	}
	check := func(what string, m Message) {
		t.Helper()
		assert.False(t, m.underRule(), "%s: not under the rule", what)
		got, changed := m.Clean()
		assert.True(t, changed, "%s: Clean changes it", what)
		assert.True(t, got.underRule(), "%s: Clean puts it under the rule", what)
	}
	m := valid()
	assert.True(t, m.underRule())
	_, changed := m.Clean()
	assert.False(t, changed)

	// Every field of Message and Block that holds no text, named: one
	// added must be placed here or made to hold text the check reads.
	noText := map[string]bool{"Content": true, "StringContent": true, "ToolError": true, "Usage": true, "Timestamp": true,
		"HTTPStatus": true, "Headers": true, "Err": true, "Redacted": true, "Arguments": true}
	for _, typ := range []reflect.Type{reflect.TypeFor[Message](), reflect.TypeFor[Block]()} {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Type.Kind() != reflect.String {
				assert.True(t, noText[f.Name], "%s.%s (%s): a field the text rule does not place", typ.Name(), f.Name, f.Type)
				continue
			}
			m := valid()
			target := reflect.ValueOf(&m).Elem()
			if typ.Name() == "Block" {
				target = reflect.ValueOf(&m.Content[0]).Elem()
			}
			target.Field(i).SetString(target.Field(i).String() + "\xff")
			check(typ.Name()+"."+f.Name, m)
		}
	}
	m = valid()
	m.Headers = map[string]string{"k\xff": "v"}
	check("a header's key", m)
	m = valid()
	m.Headers = map[string]string{"k": "v\xfe"}
	check("a header's value", m)
	for i := range reflect.TypeFor[Cost]().NumField() {
		for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			m = valid()
			cost := *m.Usage.Cost
			reflect.ValueOf(&cost).Elem().Field(i).SetFloat(bad)
			m.Usage = &Usage{Cost: &cost}
			check("cost "+reflect.TypeFor[Cost]().Field(i).Name, m)
		}
	}
	for _, args := range []string{`{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":"` + "\u2028" + `"}`} {
		m = valid()
		m.Content = slices.Clone(m.Content)
		m.Content[0].Arguments = json.RawMessage(args)
		check("arguments "+args, m)
	}
}

// FuzzUnderRule: Clean's shortcut (underRule) says a message is under the
// rule exactly when Clean's full path changes nothing, and then that path
// returns the message as it was; text of any bytes placed in any text
// field of a message or of its block, in a header, in a tool call's
// arguments, with a cost of any value.
func FuzzUnderRule(f *testing.F) {
	f.Add(uint8(0), "ok", []byte(`{"a":"b"}`), "k", "v", 1.0)
	f.Add(uint8(1), "\xff", []byte(`{"a":"b"}`), "k", "v", 1.0)
	f.Add(uint8(12), "\xed\xa0\x80", []byte(nil), "k", "v", 0.0)
	f.Add(uint8(3), "ok", []byte(`{"a":"\ud800"}`), "k", "v", 1.0)
	f.Add(uint8(4), "ok", []byte("{\"a\":\"\u2028\"}"), "k", "v", 1.0)
	f.Add(uint8(5), "ok", []byte("{\"a\":\"\xff\"}"), "k", "v", 1.0)
	f.Add(uint8(6), "ok", []byte(`{"a":"\udc00\ud83d\ude00"}`), "k\xfe", "v", 1.0)
	f.Add(uint8(7), "ok", []byte(`{}`), "k", "v\xc3", 1.0)
	f.Add(uint8(8), "ok", []byte(`{}`), "k", "v", math.NaN())
	f.Add(uint8(9), "ok", []byte(`{}`), "k", "v", math.Inf(-1))
	f.Add(uint8(10), "ok", []byte{}, "", "", math.Copysign(0, -1))
	f.Add(uint8(11), "ok", []byte(`not json \xff`), "", "", 0.0)
	f.Fuzz(func(t *testing.T, which uint8, text string, args []byte, hk, hv string, cost float64) {
		m := Message{ID: "m", Role: RoleAssistant, Content: []Block{{Type: BlockToolCall, ID: "c", Name: "n", Arguments: args}},
			StopReason: StopReasonStop, Provider: "p", Model: "x", Headers: map[string]string{hk: hv, "k2": "v2"},
			Usage: &Usage{Cost: &Cost{Input: 1, Total: cost}}}
		// text goes into one text field of the message or its block.
		var fields []reflect.Value
		for _, v := range []reflect.Value{reflect.ValueOf(&m).Elem(), reflect.ValueOf(&m.Content[0]).Elem()} {
			for i := range v.NumField() {
				if v.Field(i).Kind() == reflect.String {
					fields = append(fields, v.Field(i))
				}
			}
		}
		field := fields[int(which)%len(fields)]
		field.SetString(text)
		under := m.underRule()
		got, changed := m.clean()
		if under == changed {
			t.Fatalf("underRule says %v, Clean's full path changed %v: %+v", under, changed, m)
		}
		if under && !reflect.DeepEqual(got, m) {
			t.Fatalf("under the rule, yet Clean's full path returns %+v for %+v", got, m)
		}
		if viaClean, cleanChanged := m.Clean(); cleanChanged != changed || !reflect.DeepEqual(viaClean, got) {
			t.Fatalf("Clean returns %+v (changed %v), its full path %+v (changed %v)", viaClean, cleanChanged, got, changed)
		}
	})
}
