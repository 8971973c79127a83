package main

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// outputLines decodes classify's output, one JSON object a line.
func outputLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, line := range strings.SplitAfter(out, "\n") {
		if line == "" {
			continue
		}
		require.True(t, strings.HasSuffix(line, "\n"), "every output line ends in a newline: %q", line)
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &obj), "output line %q", line)
		objs = append(objs, obj)
	}
	return objs
}

func TestClassifyCommand(t *testing.T) {
	input := strings.Join([]string{
		`503 Service Unavailable`,
		`{"stopReason":"error","errorMessage":"429 Too Many Requests","headers":{"Retry-After":"7"}}`,
		`{"stopReason":"stop","usage":{"input":1200,"output":40}}`,
		`{"stopReason":"stop","usage":{"input":250000}}`,
		`{"stopReason":"length","usage":{"input":199000,"output":0},"contextWindow":200000}`,
		`prompt is too long: 213462 tokens > 200000 maximum`,
		`server_error`,
		`1500 tokens`,
		`You exceeded your current quota (insufficient_quota)`,
		`{"stopReason":"error","status":529}`,
		`Invalid API key`,
	}, "\n") + "\n"
	seed := []string{"retryable", "retryable", "none", "none", "overflow", "overflow", "fatal", "retryable", "fatal", "retryable", "fatal"}
	ext := []string{"retryable", "retryable", "none", "none", "overflow", "overflow", "retryable", "fatal", "usage_limit", "retryable", "fatal"}

	code, out, errOut := runCmd(input, "classify")
	require.Equal(t, 0, code, errOut)
	objs := outputLines(t, out)
	require.Len(t, objs, len(seed))
	for i, want := range seed {
		assert.Equal(t, want, objs[i]["class"], "seed, line %d", i+1)
	}
	assert.Equal(t, float64(7000), objs[1]["retryAfterMs"])
	assert.NotContains(t, objs[0], "retryAfterMs", "absent fields are left out")

	code, out, _ = runCmd(input, "classify", "--rules", "extended")
	require.Equal(t, 0, code)
	objs = outputLines(t, out)
	require.Len(t, objs, len(ext))
	for i, want := range ext {
		assert.Equal(t, want, objs[i]["class"], "extended, line %d", i+1)
	}

	// --context-window turns an over-window "stop" into a silent overflow.
	code, out, _ = runCmd(`{"stopReason":"stop","usage":{"input":250000}}`+"\n", "classify", "--context-window", "200000")
	require.Equal(t, 0, code)
	assert.Equal(t, "{\"class\":\"overflow\"}\n", out)
}

func TestClassifyCommandBadInput(t *testing.T) {
	huge := "x" + strings.Repeat("a", 10<<20) + " 503"
	cases := []struct {
		name  string
		line  string
		class string // "" when the line gets an error object
		says  string
	}{
		{"invalid UTF-8", "\xff\xfe fetch failed \xc3", "retryable", ""},
		{"NUL bytes", "over\x00loaded \x00 overloaded", "retryable", ""},
		{"a 10 MiB line", huge, "retryable", ""},
		{"empty line", "", "", "empty line"},
		{"blank line", "   \t", "", "empty line"},
		{"JSON array", `[{"stopReason":"error"}]`, "", "not an object"},
		{"JSON string", `"503"`, "", "not an object"},
		{"truncated JSON", `{"stopReason":"error","errorMessage":"50`, "", "ends before the object does"},
		{"mistyped field", `{"status":"429"}`, "", `field "status"`},
		{"unknown field", `{"stopReasons":"error"}`, "", `unknown field "stopReasons"`},
		{"unknown stopReason", `{"stopReason":"crashed"}`, "", `unknown stopReason "crashed"`},
		{"two objects", `{"status":500} {"status":400}`, "", "text after the object"},
		{"invalid UTF-8 in JSON", "{\"errorMessage\":\"\xff overloaded\"}", "retryable", ""},
		{"CRLF ending", "overloaded\r", "retryable", ""},
	}
	var input strings.Builder
	for _, c := range cases {
		input.WriteString(c.line + "\n")
	}
	input.WriteString("503 at the end, no newline")
	code, out, errOut := runCmd(input.String(), "classify")
	assert.Equal(t, 0, code)
	assert.Empty(t, errOut)
	objs := outputLines(t, out)
	require.Len(t, objs, len(cases)+1, "one output line per input line")
	for i, c := range cases {
		obj := objs[i]
		if c.class != "" {
			assert.Equal(t, c.class, obj["class"], c.name)
			assert.NotContains(t, obj, "error", c.name)
			continue
		}
		assert.NotContains(t, obj, "class", c.name)
		assert.Equal(t, float64(i+1), obj["line"], c.name)
		assert.Contains(t, obj["error"], c.says, c.name)
		assert.NotContains(t, obj["error"], "goroutine", c.name)
		assert.NotContains(t, obj["error"], "main.", c.name)
	}
	assert.Equal(t, "retryable", objs[len(cases)]["class"])
}

func TestClassifyCommandFlags(t *testing.T) {
	code, _, errOut := runCmd("", "classify", "--rules", "strict")
	assert.Equal(t, 2, code)
	assert.Equal(t, "agentfsm classify: unknown --rules \"strict\" (want seed or extended)\n", errOut)
	code, _, errOut = runCmd("", "classify", "--context-window", "-1")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "must not be negative")
	code, _, errOut = runCmd("", "classify", "--context-window", "lots")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "context-window")
	code, out, _ := runCmd("", "classify", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "--rules")
	code, out, _ = runCmd("", "classify")
	assert.Equal(t, 0, code, "empty input: nothing to do")
	assert.Empty(t, out)
}

// TestClassifyStreams feeds lines through a pipe one at a time and reads
// each answer before writing the next line: output is not held back until
// the end of the input.
func TestClassifyStreams(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int)
	go func() {
		done <- run([]string{"classify"}, &environment{stdin: inR, stdout: outW, stderr: io.Discard, now: time.Now})
		outW.Close()
	}()
	answers := bufio.NewReader(outR)
	for _, line := range []string{"overloaded", "bad key", "prompt is too long"} {
		_, err := io.WriteString(inW, line+"\n")
		require.NoError(t, err)
		got, err := answers.ReadString('\n')
		require.NoError(t, err)
		assert.Contains(t, got, `"class"`)
	}
	inW.Close()
	assert.Equal(t, 0, <-done)
}
