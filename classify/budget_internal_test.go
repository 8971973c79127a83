package classify

import "testing"

func TestOverBudget(t *testing.T) {
	for _, c := range []struct {
		text string
		want bool
	}{
		{"on tokens per minute (TPM): Limit 7000, Used 0, Requested ~12903. Please try again in 50.6s.", true},
		{"Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 22999, Requested 12528.", false},
		{"LIMIT 10, USED 10, REQUESTED 11", true},
		{"Limit 10, Used 10, Requested 10", false},
		{"limit 5 then Limit 10, Used 0, Requested 11", true},
		{"Limit 10, Used 0", false},
		{"Limit , Used 0, Requested 11", false},
		{"Limit 10, Used x, Requested 11", false},
		{"Limit 10, Used 0, Requested ~", false},
		{"Limit 10, Used 0, Requested 99999999999999999999999", false}, // too long to read: no claim
		{"Limit 1, Used 0, Requested 999999999999999999", true},
		{"limit ", false},
		{"", false},
	} {
		if got := overBudget(c.text); got != c.want {
			t.Errorf("overBudget(%q) = %v, want %v", c.text, got, c.want)
		}
	}
}
