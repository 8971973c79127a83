package policy

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCalibrationAtItsBounds: the calibration's arithmetic at the edges of
// each of its conditions, where an off-by-one shows: the saturation of a
// calibrated size, an estimate that fits a budget exactly or overshoots it
// by the float's rounding, a count of no tokens, an estimate of exactly
// minCalibrationTokens, and ratios at the bounds.
func TestCalibrationAtItsBounds(t *testing.T) {
	// tokens saturates at MaxInt/2, from the first size that reaches it.
	assert.Equal(t, math.MaxInt/2, calibration(0).tokens(1<<62), "2^62 reaches the saturation: MaxInt/2, not 2^62")
	assert.Equal(t, math.MaxInt/2, calibration(2).tokens(math.MaxInt/3), "a size past it saturates")
	assert.Equal(t, 0, calibration(2).tokens(0))
	assert.Equal(t, 3, calibration(1.5).tokens(2))

	// estimateRoom: the largest estimate whose calibrated size fits.
	assert.Equal(t, 100, calibration(0).estimateRoom(100), "an exact fit is room")
	assert.Equal(t, 200, calibration(0.5).estimateRoom(100), "a ratio under 1 makes more room than the budget")
	assert.Equal(t, 169, calibration(1.1).estimateRoom(187), "187/1.1 gives 170, whose size the float rounds to 188: one less")
	assert.Equal(t, 0, calibration(2).estimateRoom(0))
	assert.Equal(t, 0, calibration(2).estimateRoom(-5))

	// chars: four characters a token, by the ratio.
	assert.Equal(t, 200, calibration(2).chars(100))
	assert.Equal(t, 0, calibration(2).chars(0))

	// sample: a count of no tokens, or of a short estimate, changes nothing.
	assert.Equal(t, calibration(0), calibration(0).sample(0, 2048), "no count")
	assert.Equal(t, calibration(3), calibration(3).sample(-1, 2048), "no count")
	assert.Equal(t, calibration(2), calibration(0).sample(2*minCalibrationTokens, minCalibrationTokens), "an estimate of exactly the least that calibrates")
	assert.Equal(t, calibration(0), calibration(0).sample(2*minCalibrationTokens, minCalibrationTokens-1), "one under it")
	assert.Equal(t, calibration(minTokenRatio), calibration(0).sample(1, 4096), "a ratio under the bounds is the lower bound")
	assert.Equal(t, calibration(maxTokenRatio), calibration(0).sample(1<<30, 4096), "and over them the upper")

	// validRatio: 0 and the bounds themselves are valid.
	for _, r := range []float64{0, minTokenRatio, 1, maxTokenRatio} {
		assert.True(t, validRatio(r), "%v", r)
	}
	for _, r := range []float64{-1, minTokenRatio / 2, maxTokenRatio * 2, math.NaN(), math.Inf(1)} {
		assert.False(t, validRatio(r), "%v", r)
	}
}
