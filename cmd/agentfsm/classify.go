package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/internal/lines"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// maxClassifyLine is the longest input line classify reads; a longer one
// gets an error line and the lines after it are read as usual.
const maxClassifyLine = 64 << 20

// classifyInput is one JSON input line.
type classifyInput struct {
	StopReason    *string           `json:"stopReason"`
	ErrorMessage  string            `json:"errorMessage"`
	Usage         transcript.Usage  `json:"usage"`
	Status        int               `json:"status"`
	ErrorType     string            `json:"errorType"`
	Headers       map[string]string `json:"headers"`
	ContextWindow *int              `json:"contextWindow"`
}

// classifyOutput is one output line: a class (and hint, and with --explain
// the rules that decided), or why the line could not be classified.
type classifyOutput struct {
	Class        string   `json:"class,omitempty"`
	RetryAfterMs *int64   `json:"retryAfterMs,omitempty"`
	Why          []string `json:"why,omitempty"`
	Line         int      `json:"line,omitempty"`
	Error        string   `json:"error,omitempty"`
}

var stopReasons = map[string]bool{"stop": true, "toolUse": true, "length": true, "error": true, "aborted": true}

func runClassify(args []string, env *environment) int {
	fs := newFlagSet("classify", "agentfsm classify [--rules extended|seed] [--context-window N] [--explain] < input\n\n"+
		"Each line of stdin is an error: plain text, a JSON message ({\"stopReason\":…,\"errorMessage\":…}),\n"+
		"or a provider's JSON error body (an array of them is read for its first body). Each gets one\n"+
		"JSON line out: its verdict ({\"class\":\"retryable\"}), or why it was refused ({\"line\":3,\"error\":…}).\n"+
		"The exit status is 1 when any line was refused, after every other verdict is printed.")
	rulesName := fs.String("rules", policy.DefaultConfig().Retry.Rules.String(), "rule `set`: extended (a new session's) or seed (exactly the rules of the pi coding agent's\n"+
		"AgentSession, whose retry and compaction policy agentfsm ports: docs/classification.md)")
	window := fs.Int("context-window", 0, "the model's context window in `tokens`, for silent and truncated overflows (0: unknown)")
	explain := fs.Bool("explain", false, "say, per input, how it was read and which rules decided (a \"why\" list)")
	if code := fs.parse(args, env); code >= 0 {
		return code
	}
	rules, err := classify.ParseRules(*rulesName)
	if err != nil {
		fmt.Fprintf(env.stderr, "agentfsm classify: unknown --rules %q (want seed or extended)\n", *rulesName)
		return 2
	}
	if *window < 0 {
		fmt.Fprintf(env.stderr, "agentfsm classify: --context-window must not be negative, got %d\n", *window)
		return 2
	}

	// A line that cannot be classified gets an error object in its place,
	// the lines after it are read as usual, and the exit status says that
	// one was refused.
	refused := false
	lr := lines.NewReader(env.stdin, maxClassifyLine)
	out := bufio.NewWriter(env.stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for n := 1; ; n++ {
		line, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var res classifyOutput
		switch {
		case errors.Is(err, lines.ErrTooLong):
			res = classifyOutput{Line: n, Error: fmt.Sprintf("line longer than %d MiB", maxClassifyLine>>20)}
		case err != nil:
			fmt.Fprintf(env.stderr, "agentfsm classify: reading input: %v\n", err)
			_ = out.Flush()
			return 1
		default:
			res = classifyLine(line, n, rules, *window, *explain, env.now())
		}
		refused = refused || res.Error != ""
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(env.stderr, "agentfsm classify: writing output: %v\n", err)
			return 1
		}
		if !lr.Buffered() {
			if err := out.Flush(); err != nil {
				fmt.Fprintf(env.stderr, "agentfsm classify: writing output: %v\n", err)
				return 1
			}
		}
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintf(env.stderr, "agentfsm classify: writing output: %v\n", err)
		return 1
	}
	if refused {
		return 1
	}
	return 0
}

// classifyLine classifies one input line. A JSON object with a message's
// own keys (stopReason, errorMessage) is a message, its fields checked
// strictly; any other JSON object is read as a provider's error body
// (classify.ParseBody) when it is one, and so is a JSON array holding one
// (Gemini's [{"error":…}]); any other JSON array, and a JSON string, is
// refused; everything else (other JSON objects, text that only
// starts like JSON, a Python dict rendering) is the error text of an
// "error" message.
func classifyLine(line []byte, n int, rules classify.Rules, window int, explain bool, now time.Time) classifyOutput {
	fail := func(format string, args ...any) classifyOutput {
		return classifyOutput{Line: n, Error: fmt.Sprintf(format, args...)}
	}
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return fail("empty line")
	}
	m := classify.Message{StopReason: transcript.StopReasonError, ContextWindow: window, ErrorMessage: string(line)}
	read := "read as error text"
	switch {
	case trimmed[0] == '{' && isMessageShape(trimmed):
		read = "read as a message"
		var in classifyInput
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return fail("invalid JSON object: %s", jsonError(err))
		}
		if dec.More() {
			return fail("invalid JSON object: text after the object")
		}
		if in.StopReason != nil {
			if !stopReasons[*in.StopReason] {
				return fail("unknown stopReason %q (want stop, toolUse, length, error or aborted)", *in.StopReason)
			}
			m.StopReason = transcript.StopReason(*in.StopReason)
		}
		if in.ContextWindow != nil {
			if *in.ContextWindow < 0 {
				return fail("contextWindow must not be negative")
			}
			m.ContextWindow = *in.ContextWindow
		}
		m.ErrorMessage, m.Usage, m.Status, m.ErrorType, m.Headers = in.ErrorMessage, in.Usage, in.Status, in.ErrorType, in.Headers
	case trimmed[0] == '{' || trimmed[0] == '[':
		if pe, ok := classify.ParseBody(trimmed); ok {
			read = fmt.Sprintf("read as a provider error body: %q", pe.String())
			m.Status, m.ErrorType, m.ErrorMessage = pe.Status, pe.Type, pe.String()
		} else if trimmed[0] == '[' && json.Valid(trimmed) {
			return fail("JSON array holds no provider error body")
		}
	case trimmed[0] == '"':
		if json.Valid(trimmed) {
			return fail("JSON value is not an object")
		}
	}
	var res classify.Result
	var why []classify.Why
	if explain {
		res, why = rules.Explain(m, now)
	} else {
		res = rules.Classify(m, now)
	}
	out := classifyOutput{Class: res.Class.String()}
	if res.HasRetryAfter {
		ms := res.RetryAfter.Milliseconds()
		out.RetryAfterMs = &ms
	}
	if explain {
		out.Why = append(out.Why, read)
		for _, w := range why {
			out.Why = append(out.Why, w.String())
		}
	}
	return out
}

// isMessageShape reports whether a line that starts with "{" is meant as a
// message: a JSON object with the key stopReason or errorMessage, or text
// that is not JSON but names one of them as a key (a message with a
// mistake, which gets an error rather than a guess).
func isMessageShape(trimmed []byte) bool {
	if !json.Valid(trimmed) {
		return bytes.Contains(trimmed, []byte(`"stopReason"`)) || bytes.Contains(trimmed, []byte(`"errorMessage"`))
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(trimmed, &keys) != nil {
		return false
	}
	_, stop := keys["stopReason"]
	_, text := keys["errorMessage"]
	return stop || text
}

// jsonError rewords encoding/json's errors without Go type names.
func jsonError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "value"
		}
		return fmt.Sprintf("field %q: a JSON %s where %s was expected", field, typeErr.Value, jsonKind(typeErr.Type.Kind().String()))
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("%v at byte %d", syntaxErr, syntaxErr.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the line ends before the object does"
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return "unknown field " + rest
	}
	return strings.TrimPrefix(msg, "json: ")
}

func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "int", "int64":
		return "an integer"
	case "map", "struct":
		return "an object"
	}
	return "a " + strconv.Quote(kind)
}
