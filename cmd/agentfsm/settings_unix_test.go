//go:build unix

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An endless settings "file" is refused at the limit instead of being read
// until memory runs out.
func TestLoadSettingsEndless(t *testing.T) {
	_, err := loadSettings("/dev/zero")
	require.Error(t, err)
	assert.Equal(t, "--settings: /dev/zero: larger than 1048576 bytes, which no settings file is", err.Error())
}
