package policy

import (
	"math"
	"testing"

	"github.com/agentfsm/agentfsm/transcript"
	"github.com/stretchr/testify/assert"
)

// issue item 24: the context size a usage reports saturates instead of
// wrapping, and a negative count counts as 0.
func TestContextTokensSaturates(t *testing.T) {
	cases := []struct {
		name string
		u    *transcript.Usage
		want int
	}{
		{"no usage", nil, 0},
		{"totalTokens wins", &transcript.Usage{Input: 5, Output: 5, TotalTokens: 7}, 7},
		{"the sum of the parts", &transcript.Usage{Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4}, 10},
		{"2^62 twice", &transcript.Usage{Output: 1 << 62, CacheWrite: 1 << 62}, math.MaxInt},
		{"all four at the limit", &transcript.Usage{Input: math.MaxInt, Output: math.MaxInt, CacheRead: math.MaxInt, CacheWrite: math.MaxInt}, math.MaxInt},
		{"up to the limit exactly", &transcript.Usage{Input: math.MaxInt - 3, Output: 1, CacheRead: 1, CacheWrite: 1}, math.MaxInt},
		{"a negative part counts as 0", &transcript.Usage{Input: 100, Output: -50}, 100},
		{"all negative", &transcript.Usage{Input: math.MinInt, Output: math.MinInt, CacheRead: -1, CacheWrite: -1}, 0},
		{"a negative totalTokens: the parts", &transcript.Usage{Input: 3, TotalTokens: -9}, 3},
		{"totalTokens at the limit", &transcript.Usage{TotalTokens: math.MaxInt}, math.MaxInt},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, contextTokens(c.u), c.name)
	}
}
