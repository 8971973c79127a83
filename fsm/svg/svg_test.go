package svg

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRenderErrorIsOneLine: Graphviz's messages end in a newline, and some
// run over two lines; the error is one line that starts "svg: ", which the
// command prints as its one-line reason.
func TestRenderErrorIsOneLine(t *testing.T) {
	for _, dot := range []string{
		"digraph {",
		"garbage",
		"digraph { a [label=<<b>] }",
	} {
		_, err := renderDOT(context.Background(), []byte(dot))
		if err == nil {
			t.Fatalf("%q: no error", dot)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "svg: parsing DOT: syntax error") || strings.ContainsAny(msg, "\r\n") || strings.TrimSpace(msg) != msg {
			t.Errorf("%q: error %q is not one line that says what is wrong", dot, msg)
		}
	}
}
