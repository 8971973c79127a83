package states_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/states"
)

func TestAllInDiagramOrder(t *testing.T) {
	want := []states.State{"idle", "classifying", "backoff", "continuing", "compacting", "exhausted", "cancelled"}
	assert.Equal(t, want, states.All())
	// All returns a copy: changing it does not change the package's list.
	got := states.All()
	got[0] = "x"
	assert.Equal(t, states.Idle, states.All()[0])
}

func TestValidAndPassThrough(t *testing.T) {
	for _, s := range states.All() {
		assert.True(t, s.Valid(), s)
		assert.Equal(t, s == states.Exhausted || s == states.Cancelled, s.PassThrough(), s)
	}
	for _, s := range []states.State{"", "Idle", "idle ", "done"} {
		assert.False(t, s.Valid(), "%q", s)
		assert.False(t, s.PassThrough(), "%q", s)
	}
}

func TestTextRoundTrip(t *testing.T) {
	for _, s := range states.All() {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		assert.Equal(t, `"`+string(s)+`"`, string(b))
		var back states.State
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, s, back)
	}
}

func TestTextRejectsUnknown(t *testing.T) {
	_, err := json.Marshal(states.State("sleeping"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"sleeping"`)

	s := states.Backoff
	err = json.Unmarshal([]byte(`"Backoff"`), &s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"Backoff"`)
	assert.Equal(t, states.Backoff, s, "a failed unmarshal leaves the value unchanged")

	_, err = states.Parse("")
	assert.Error(t, err)
}
