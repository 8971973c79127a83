package transitions_test

import (
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	tr "github.com/agentfsm/agentfsm/transitions"
)

// issue item 24: the threshold W − max(floor(0.15W), reserve) and the
// comparison with the tokens are exact at the ends of the int range.
func TestCompactionThresholdBoundaries(t *testing.T) {
	cases := []struct {
		window, reserve, want int
	}{
		{math.MaxInt, 0, math.MaxInt - 1383505805528216371}, // floor(0.15 × MaxInt)
		{math.MaxInt, math.MaxInt, 0},
		{math.MaxInt, math.MinInt, math.MaxInt - 1383505805528216371},
		{1, math.MaxInt, 1 - math.MaxInt},
		{1, 0, 1},
		{6, 0, 6}, // floor(0.9) = 0
		{7, 0, 6}, // floor(1.05) = 1
		{100, -5, 85},
		{100, math.MinInt, 85},
	}
	for _, c := range cases {
		got, ok := tr.CompactionThreshold(c.window, c.reserve)
		assert.True(t, ok)
		assert.Equal(t, c.want, got, "window %d reserve %d", c.window, c.reserve)
	}
	for _, w := range []int{0, -1, math.MinInt} {
		_, ok := tr.CompactionThreshold(w, 0)
		assert.False(t, ok, "window %d", w)
	}

	over := func(tokens, window, reserve int) bool {
		return tr.Facts{Tokens: tokens, ContextWindow: window, ReserveTokens: reserve}.OverThreshold()
	}
	assert.True(t, over(math.MaxInt, math.MaxInt, 0))
	assert.True(t, over(math.MaxInt, math.MaxInt, math.MaxInt))
	assert.False(t, over(0, math.MaxInt, math.MaxInt), "the threshold is 0: 0 tokens are not above it")
	assert.True(t, over(1, math.MaxInt, math.MaxInt))
	assert.False(t, over(math.MinInt, math.MaxInt, 0))
	assert.False(t, over(math.MinInt, 1, math.MaxInt), "MinInt is below 1 − MaxInt")
	assert.True(t, over(0, 1, math.MaxInt))
	assert.False(t, over(math.MaxInt, 0, 0), "no window, no threshold")
	assert.False(t, over(math.MaxInt, math.MinInt, math.MinInt))
}

// issue item 24: for any window and reserve, the threshold is the exact
// value of W − max(floor(0.15W), reserve).
func TestCompactionThresholdIsExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := rapid.Int().Draw(t, "window")
		reserve := rapid.Int().Draw(t, "reserve")
		got, ok := tr.CompactionThreshold(w, reserve)
		if ok != (w > 0) {
			t.Fatalf("window %d: ok = %v", w, ok)
		}
		if !ok {
			return
		}
		floor := new(big.Int).Div(new(big.Int).Mul(big.NewInt(int64(w)), big.NewInt(15)), big.NewInt(100))
		sub := floor
		if r := big.NewInt(int64(reserve)); r.Cmp(floor) > 0 {
			sub = r
		}
		want := new(big.Int).Sub(big.NewInt(int64(w)), sub)
		if !want.IsInt64() || want.Int64() != int64(got) {
			t.Fatalf("window %d reserve %d: got %d, want %s", w, reserve, got, want)
		}
	})
}
