package policy

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
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

// TestNestedTakeKeepsTheOuterFacts: a take inside another (which no
// action makes today: they raise steps) decides on its own step's facts,
// and leaves the facts that the take in progress reads, in the scratch,
// as they were.
func TestNestedTakeKeepsTheOuterFacts(t *testing.T) {
	e, err := New(Setup{SessionID: "s", Model: Model{Provider: "p", ID: "m", ContextWindow: 1000}, Config: DefaultConfig()})
	require.NoError(t, err)
	e.begin()
	sc := e.work()
	outer := transitions.Facts{Signal: transitions.AbortCalled, Attempt: 7}
	sc.taking, sc.facts = true, outer
	took := e.take(&step{facts: transitions.Facts{Signal: transitions.CompactCalled, AlreadyCompacted: true}})
	assert.True(t, took, "the nested take decides on its own facts (compaction refused)")
	assert.Equal(t, outer, sc.facts, "the outer take's facts")
	assert.True(t, sc.taking, "the outer take is still in progress")
	sc.taking = false // the outer take's end
	effects := e.end(time.Unix(1, 0))
	require.NotEmpty(t, effects)
	assert.Equal(t, FinishCompact, effects[0].Kind)
	assert.ErrorIs(t, effects[0].Err, ErrAlreadyCompacted)
	e.Release()
}
