package policy

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/transitions"
)

// TestActionsAreNamedAfterTheTable: actions[i] carries out
// transitions.Actions()[i], and its name is that action's, letters only
// ("endChain(failed)" is endChainFailed): a function in the wrong place,
// or an action of the table with no function, fails here.
func TestActionsAreNamedAfterTheTable(t *testing.T) {
	all := transitions.Actions()
	require.Len(t, actions, len(all), "one function per action of the table")
	letters := func(s string) string {
		return strings.Map(func(r rune) rune {
			if unicode.IsLetter(r) {
				return unicode.ToLower(r)
			}
			return -1
		}, s)
	}
	for i, a := range all {
		assert.Equal(t, i, a.Index())
		name := runtime.FuncForPC(reflect.ValueOf(actions[i]).Pointer()).Name()
		name = name[strings.LastIndex(name, ".")+1:]
		assert.Equal(t, letters(string(a)), letters(name), "actions[%d] is %s, the table's action %d is %s", i, name, i, a)
	}
	assert.Equal(t, -1, transitions.Action("dance").Index())
}
