package policy

import (
	"math"
	"testing"
)

// Token estimates saturate instead of wrapping on absurd image counts.
func TestEstimateTokensSaturates(t *testing.T) {
	for _, images := range []int{math.MaxInt, math.MaxInt / 4800, -5} {
		if got := estimateTokens(Message{Text: "abc", Images: images}); got < 0 {
			t.Errorf("Images %d: estimate %d", images, got)
		}
	}
	msgs := []Message{{Role: RoleUser, Text: "a"}, {Role: RoleUser, Images: math.MaxInt}, {Role: RoleUser, Images: math.MaxInt}}
	if at, ok := cutPoint(msgs, math.MaxInt); ok && at < 0 {
		t.Errorf("cut at %d", at)
	}
}
