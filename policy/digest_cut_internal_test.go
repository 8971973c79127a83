package policy

import "testing"

// cutChars cuts to at most n bytes on a rune boundary: back from a rune
// split at n, down to nothing when the text begins mid-rune (bytes that
// start no rune, which it must not read before).
func TestCutCharsOnRuneBoundaries(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abc", 2, "ab"},
		{"abc", 0, ""},
		{"aé", 2, "a"},
		{"aé", 3, "aé"},
		{"é", 1, ""},
		{"\x80\x80abc", 1, ""},
		{"\x80\x80abc", 2, "\x80\x80"},
		{"\x80é", 2, "\x80"},
	} {
		if got := cutChars(c.s, c.n); got != c.want {
			t.Errorf("cutChars(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
