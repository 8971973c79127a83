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

	code, out, errOut := runCmd(input, "classify", "--rules", "seed")
	require.Equal(t, 0, code, errOut)
	objs := outputLines(t, out)
	require.Len(t, objs, len(seed))
	for i, want := range seed {
		assert.Equal(t, want, objs[i]["class"], "seed, line %d", i+1)
	}
	assert.Equal(t, float64(7000), objs[1]["retryAfterMs"])
	assert.NotContains(t, objs[0], "retryAfterMs", "absent fields are left out")
	assert.NotContains(t, objs[0], "why", "no explanation unless asked")

	// The extended rules, a new session's, are the default.
	for _, args := range [][]string{{"classify", "--rules", "extended"}, {"classify"}} {
		code, out, _ = runCmd(input, args...)
		require.Equal(t, 0, code)
		objs = outputLines(t, out)
		require.Len(t, objs, len(ext))
		for i, want := range ext {
			assert.Equal(t, want, objs[i]["class"], "%v, line %d", args, i+1)
		}
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
		{"JSON array", `[{"stopReason":"error"}]`, "", "JSON array holds no provider error body"},
		{"empty JSON array", `[]`, "", "JSON array holds no provider error body"},
		{"JSON string", `"503"`, "", "not an object"},
		{"truncated JSON", `{"stopReason":"error","errorMessage":"50`, "", "ends before the object does"},
		{"mistyped field", `{"stopReason":"error","status":"429"}`, "", `field "status"`},
		{"unknown field", `{"errorMessage":"x","stopReasons":"error"}`, "", `unknown field "stopReasons"`},
		{"unknown stopReason", `{"stopReason":"crashed"}`, "", `unknown stopReason "crashed"`},
		{"two messages", `{"stopReason":"error"} {"stopReason":"stop"}`, "", "text after the object"},
		// Issue item 3: an object without a message's keys is not a message.
		{"an object of no known shape is text", `{"status":"429"}`, "retryable", ""},
		{"two objects without a message's keys are text", `{"status":500} {"status":400}`, "retryable", ""},
		{"invalid UTF-8 in JSON", "{\"errorMessage\":\"\xff overloaded\"}", "retryable", ""},
		{"CRLF ending", "overloaded\r", "retryable", ""},
	}
	var input strings.Builder
	for _, c := range cases {
		input.WriteString(c.line + "\n")
	}
	input.WriteString("503 at the end, no newline")
	code, out, errOut := runCmd(input.String(), "classify", "--rules", "seed")
	assert.Equal(t, 1, code, "lines were refused: exit 1, the other verdicts printed")
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

	// --explain answers the same, and says why for every classified line.
	code, out, errOut = runCmd(input.String(), "classify", "--rules", "seed", "--explain")
	assert.Equal(t, 1, code)
	assert.Empty(t, errOut)
	explained := outputLines(t, out)
	require.Len(t, explained, len(objs))
	for i := range objs {
		assert.Equal(t, objs[i]["class"], explained[i]["class"], "line %d", i+1)
		assert.Equal(t, objs[i]["error"], explained[i]["error"], "line %d", i+1)
		if objs[i]["class"] != nil {
			assert.NotEmpty(t, explained[i]["why"], "line %d", i+1)
		}
	}
}

// Issue item 3: the provider error bodies users paste are read for their
// typed fields; any other JSON object, and text that only looks like JSON,
// is classified as text.
func TestClassifyCommandBodies(t *testing.T) {
	cases := []struct {
		name, line, class, read string
	}{
		{"anthropic", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`,
			"retryable", `read as a provider error body: "overloaded_error: Overloaded"`},
		{"anthropic, an overflow in a 400", `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}`,
			"overflow", `read as a provider error body: "invalid_request_error: prompt is too long: 213462 tokens > 200000 maximum"`},
		{"anthropic, a permanent type", `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			"fatal", `read as a provider error body: "authentication_error: invalid x-api-key"`},
		{"openai, the code decides", `{"error":{"message":"This model's context is full.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			"overflow", `read as a provider error body: "context_length_exceeded: This model's context is full."`},
		{"google, a JSON string in the message", `{"error":{"code":400,"message":"{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"The model is overloaded.\",\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n","status":"Bad Request"}}`,
			"retryable", `read as a provider error body: "503 UNAVAILABLE: The model is overloaded."`},
		{"google, a quota per day in a 429", `{"error":{"code":429,"message":"Quota exceeded for metric: generate_content_free_tier_requests, limit: 50 per day","status":"RESOURCE_EXHAUSTED"}}`,
			"usage_limit", `read as a provider error body: "429 RESOURCE_EXHAUSTED: Quota exceeded for metric: generate_content_free_tier_requests, limit: 50 per day"`},
		{"bedrock", `{"message":"Too many requests, please wait before trying again."}`,
			"retryable", `read as a provider error body: "Too many requests, please wait before trying again."`},
		{"openrouter's upstream body", `{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long\"}}"}}}`,
			"overflow", `read as a provider error body: "400 invalid_request_error: prompt is too long"`},
		{"google, a body in an array", `[{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}]`,
			"retryable", `read as a provider error body: "503 UNAVAILABLE: The model is overloaded. Please try again later."`},
		{"a python dict rendering is text", `{'error': {'message': 'Overloaded', 'type': 'overloaded_error'}}`, "retryable", "read as error text"},
		{"another JSON object is text", `{"detail":"upstream connect error"}`, "retryable", "read as error text"},
		{"an object with no text is text", `{"foo":1}`, "fatal", "read as error text"},
	}
	var input strings.Builder
	for _, c := range cases {
		input.WriteString(c.line + "\n")
	}
	code, out, errOut := runCmd(input.String(), "classify", "--explain")
	require.Equal(t, 0, code, errOut)
	objs := outputLines(t, out)
	require.Len(t, objs, len(cases))
	for i, c := range cases {
		assert.Equal(t, c.class, objs[i]["class"], c.name)
		why, _ := objs[i]["why"].([]any)
		require.NotEmpty(t, why, c.name)
		assert.Equal(t, c.read, why[0], c.name)
		assert.Greater(t, len(why), 1, "%s: a rule decided", c.name)
	}
}

// Issue 24: a Gemini error body wrapped in a JSON array is read as the body
// it holds, and its RetryInfo's retryDelay is the hint.
func TestClassifyCommandGeminiArrayHint(t *testing.T) {
	line := `[{"error":{"code":429,"message":"You exceeded your current quota. Please retry in 38.5s.","status":"RESOURCE_EXHAUSTED",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.Help","links":[]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"38s"}]}}]`
	code, out, errOut := runCmd(line+"\n", "classify", "--explain")
	require.Equal(t, 0, code, errOut)
	objs := outputLines(t, out)
	require.Len(t, objs, 1)
	assert.Equal(t, "usage_limit", objs[0]["class"])
	assert.Equal(t, float64(38000), objs[0]["retryAfterMs"], "the RetryInfo, not the message's 38.5s")
	why, _ := objs[0]["why"].([]any)
	require.NotEmpty(t, why)
	assert.Equal(t, `read as a provider error body: "429 RESOURCE_EXHAUSTED: You exceeded your current quota. Please retry in 38.5s. (retryDelay: 38s)"`, why[0])
}

// Issue item 5: --explain says which rule decided each verdict.
func TestClassifyCommandExplain(t *testing.T) {
	input := strings.Join([]string{
		`{"stopReason":"error","errorMessage":"429 Too Many Requests","headers":{"Retry-After":"10"}}`,
		`{"stopReason":"stop","usage":{"input":250000},"contextWindow":200000}`,
		`{"stopReason":"error","status":529}`,
		`Invalid API key`,
	}, "\n") + "\n"
	code, out, errOut := runCmd(input, "classify", "--explain")
	require.Equal(t, 0, code, errOut)
	objs := outputLines(t, out)
	require.Len(t, objs, 4)
	why := func(i int) []any { w, _ := objs[i]["why"].([]any); return w }
	assert.Equal(t, []any{"read as a message", "pattern `too many requests` (extended-retry; any provider (HTTP 429)): retryable",
		"retry hint in the headers: wait 10s"}, why(0))
	assert.Equal(t, float64(10000), objs[0]["retryAfterMs"])
	assert.Equal(t, []any{"read as a message", "silent overflow (stop, input 250000 + cacheRead 0 > context window 200000): overflow"}, why(1))
	assert.Equal(t, []any{"read as a message", "HTTP status 529: transient"}, why(2))
	assert.Equal(t, []any{"read as error text", "no pattern of the extended rules matched: fatal"}, why(3))
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

// TestClassifyCommandExitStatus: classify exits 1 when any line was refused
// (its error object in its place), after printing every other line's
// verdict; 0 when every line was classified. Issue 26 item 5.
func TestClassifyCommandExitStatus(t *testing.T) {
	code, out, errOut := runCmd("503 Service Unavailable\nprompt is too long\n", "classify")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "{\"class\":\"retryable\"}\n{\"class\":\"overflow\"}\n", out)

	for _, refused := range []string{`{"stopReason":"crashed"}`, `"503"`, `[1,2]`, ""} {
		code, out, errOut = runCmd("503 Service Unavailable\n"+refused+"\nprompt is too long\n", "classify")
		assert.Equal(t, 1, code, "%q refused: exit 1", refused)
		assert.Empty(t, errOut, "the refusal is in the output, in the line's place")
		objs := outputLines(t, out)
		require.Len(t, objs, 3, refused)
		assert.Equal(t, "retryable", objs[0]["class"])
		assert.Equal(t, float64(2), objs[1]["line"], refused)
		assert.NotEmpty(t, objs[1]["error"], refused)
		assert.Equal(t, "overflow", objs[2]["class"], "the line after a refused one is classified")
	}
}

// TestClassifyCommandArrays: a JSON array of error bodies, as Google's
// APIs return, is read element by element for the first that is a body:
// one verdict per input line (the filter's contract), the first body's,
// whatever precedes it in the array; an array that holds none is refused.
// Issue 26 item 5.
func TestClassifyCommandArrays(t *testing.T) {
	overloaded := `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`
	quota := `{"error":{"code":429,"message":"Quota exceeded for metric: generate_content_free_tier_requests, limit: 50 per day","status":"RESOURCE_EXHAUSTED"}}`
	input := strings.Join([]string{
		"[" + overloaded + "]",
		"[" + quota + "," + overloaded + "]",
		`[{"candidates":[{"content":{"parts":[{"text":"Hel"}]}}]},` + overloaded + "]",
		"[[" + quota + "]]",
		`[{"candidates":[]}]`,
	}, "\n") + "\n"
	code, out, errOut := runCmd(input, "classify", "--explain")
	assert.Equal(t, 1, code, "the last array holds no body")
	assert.Empty(t, errOut)
	objs := outputLines(t, out)
	require.Len(t, objs, 5, "one verdict per input line")
	read := func(i int) any { w, _ := objs[i]["why"].([]any); return w[0] }
	assert.Equal(t, "retryable", objs[0]["class"])
	assert.Equal(t, `read as a provider error body: "503 UNAVAILABLE: The model is overloaded."`, read(0))
	assert.Equal(t, "usage_limit", objs[1]["class"], "the first body decides")
	assert.Equal(t, "retryable", objs[2]["class"], "a stream chunk before the error is passed over")
	assert.Equal(t, `read as a provider error body: "503 UNAVAILABLE: The model is overloaded."`, read(2))
	assert.Equal(t, "usage_limit", objs[3]["class"], "an array in an array")
	assert.Equal(t, float64(5), objs[4]["line"])
	assert.Equal(t, "JSON array holds no provider error body", objs[4]["error"])
}
