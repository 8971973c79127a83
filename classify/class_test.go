package classify_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
)

func TestClassNames(t *testing.T) {
	want := map[classify.Class]string{
		classify.None: "none", classify.Retryable: "retryable", classify.UsageLimit: "usage_limit",
		classify.Overflow: "overflow", classify.Fatal: "fatal",
	}
	require.Len(t, classify.Classes(), len(want))
	for _, c := range classify.Classes() {
		assert.Equal(t, want[c], c.String())
		b, err := json.Marshal(c)
		require.NoError(t, err)
		var back classify.Class
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, c, back)
	}
	assert.Equal(t, classify.None, classify.Class(0), "the zero value is None")
}

func TestClassRejectsUnknown(t *testing.T) {
	_, err := json.Marshal(classify.Class(9))
	assert.Error(t, err)
	assert.Equal(t, "Class(9)", classify.Class(9).String())
	c := classify.Fatal
	err = json.Unmarshal([]byte(`"retry"`), &c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"retry"`)
	assert.Equal(t, classify.Fatal, c)
}
