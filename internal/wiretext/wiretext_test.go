package wiretext_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/internal/wiretext"
)

func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"héllo":            "héllo",
		"a\xffb":           "a\uFFFDb",
		"\xc3":             "\uFFFD",
		"\xed\xa0\x80":     "\uFFFD\uFFFD\uFFFD", // an encoded surrogate: three bad bytes
		"\uFFFD\xfe\xfe":   "\uFFFD\uFFFD\uFFFD",
		"nul\x00 \u2028ok": "nul\x00 \u2028ok", // valid UTF-8 is left alone
	} {
		got := wiretext.String(in)
		if got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
		var back string // what encoding/json writes for in, read back
		if b, _ := json.Marshal(in); json.Unmarshal(b, &back) != nil || back != got {
			t.Errorf("String(%q) = %q is not what encoding/json writes: %q", in, got, back)
		}
	}
}

func TestError(t *testing.T) {
	if wiretext.Error(nil) != nil {
		t.Fatal("nil is not nil")
	}
	clean := errors.New("fine")
	if wiretext.Error(clean) != clean {
		t.Fatal("a valid error is not returned as it is")
	}
	inner := &fs.PathError{Op: "open", Path: "/tmp/\xff", Err: fs.ErrNotExist}
	got := wiretext.Error(inner)
	if got.Error() != "open /tmp/\uFFFD: file does not exist" {
		t.Fatalf("text %q", got.Error())
	}
	var pe *fs.PathError
	if !errors.Is(got, fs.ErrNotExist) || !errors.As(got, &pe) || pe != inner {
		t.Fatal("the replaced error does not wrap the original")
	}
}

func TestJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{}`, `{}`},
		{`{"a":"é\u00e9\u003c","b":[1,2.50,null]}`, `{"a":"é\u00e9\u003c","b":[1,2.50,null]}`},
		{"{\"a\":\"\xff\"}", `{"a":"\ufffd"}`},
		{"{\"\xc3\":\"x\xed\xa0\x80y\"}", `{"\ufffd":"x\ufffd\ufffd\ufffdy"}`},
		{`{"a":"\ud800"}`, `{"a":"\ufffd"}`},
		{`{"a":"\udc00\ud800"}`, `{"a":"\ufffd\ufffd"}`},
		{`{"a":"\ud800\u0041"}`, `{"a":"\ufffd\u0041"}`},
		{`{"a":"\ud800\ud800\udc00"}`, `{"a":"\ufffd\ud800\udc00"}`},
		{`{"a":"\uD83D\uDE00 ok"}`, `{"a":"\uD83D\uDE00 ok"}`},
		{`{"a":"\\ud800"}`, `{"a":"\\ud800"}`}, // an escaped backslash, then text
		{`{"a":"\"\ud800"}`, `{"a":"\"\ufffd"}`},
		{"{\"a\":\"line\u2028sep\u2029\"}", `{"a":"line\u2028sep\u2029"}`},
		{`{"a":"\u2028"}`, `{"a":"\u2028"}`},
		{`{"a":"\ud8`, `{"a":"\ud8`}, // cut short: not JSON, left so
		{`{"a":"\`, `{"a":"\`},
	}
	for _, c := range cases {
		got := string(wiretext.JSON([]byte(c.in)))
		if got != c.want {
			t.Errorf("JSON(%q) = %q, want %q", c.in, got, c.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("JSON(%q) = %q is not UTF-8", c.in, got)
		}
		if json.Valid([]byte(c.in)) {
			var before, after any
			if json.Unmarshal([]byte(c.in), &before) != nil || json.Unmarshal([]byte(got), &after) != nil {
				t.Fatalf("JSON(%q) = %q does not decode", c.in, got)
			}
			if mustMarshalAny(t, before) != mustMarshalAny(t, after) {
				t.Errorf("JSON(%q) = %q decodes to another value", c.in, got)
			}
		}
	}
	b := []byte(`{"a":1}`)
	if got := wiretext.JSON(b); &got[0] != &b[0] {
		t.Error("valid JSON is copied")
	}
}

func mustMarshalAny(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzJSON: for any input JSON returns valid UTF-8 without U+2028 or
// U+2029, leaves valid JSON valid and decoding to the same value, and
// changes nothing the second time.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"a":"\ud800"}`, "{\"\xff\":\"\u2028\"}", `["\\", "\uDBFF\uDFFF"]`, `"\u12`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := wiretext.JSON(in)
		if !utf8.Valid(out) {
			t.Fatalf("not UTF-8: %q", out)
		}
		again := wiretext.JSON(out)
		if string(again) != string(out) {
			t.Fatalf("not stable: %q then %q", out, again)
		}
		if !json.Valid(in) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("JSON(%q) = %q is not JSON", in, out)
		}
		var before, after any
		if json.Unmarshal(in, &before) != nil || json.Unmarshal(out, &after) != nil {
			return // a number out of float64's range, say: decodes in neither
		}
		if mustMarshalAny(t, before) != mustMarshalAny(t, after) {
			t.Fatalf("JSON(%q) = %q decodes to another value", in, out)
		}
	})
}

// BenchmarkJSON is the cost of the rule on valid arguments of 4 KiB, the
// common case: one pass, no copy.
func BenchmarkJSON(b *testing.B) {
	raw := []byte(`{"path":"main.go","content":"` + strings.Repeat(`héllo \"wörld\" \u00e9 `, 160) + `"}`)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		wiretext.JSON(raw)
	}
}

// BenchmarkString is the same for a valid string of 4 KiB.
func BenchmarkString(b *testing.B) {
	s := strings.Repeat("héllo wörld, ", 315)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		wiretext.String(s)
	}
}
