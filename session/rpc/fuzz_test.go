package rpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// FuzzServeLine feeds arbitrary input to the server, followed by a
// get_state line, with a scripted session behind it. The server never
// panics; every output line is valid JSON in valid UTF-8, with no raw
// U+2028 or U+2029 (which JavaScript reads as line breaks); every line but a
// blank one (JSON whitespace only: spaces, tabs, carriage returns; docs/rpc.md)
// gets exactly one response; and the server keeps reading: the get_state
// after the input is answered.
func FuzzServeLine(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","type":"get_state"}`,
		"",
		" \t\r",
		"\f",
		"\v\u00a0",
		"null",
		"[1,2]",
		`"get_state"`,
		`{"id":"n","type":null}`,
		`{"id":"e","type":""}`,
		"{\"id\":\"\xff\",\"type\":\"get\xffstate\"}",
		"{\"id\":{\"k\xfe\":[\"\xc3\",1e400]},\"type\":\"abort_retry\"}",
		"{\"id\":\"\u2028\\ud800\",\"type\":\"prompt\",\"message\":\"a\u2029\\udc00\xff\"}",
		`{"id":7,"type":"set_auto_retry","enabled":"yes"}`,
		`{"type":"prompt","message":"one"}` + "\n" + `{"type":"prompt","message":"two"}`,
		`{"type":"prompt","message":"hi"}` + "\r\n" + `{"type":"abort"}` + "\r\n" + `{"type":"get_messages"}`,
		`{"type":"prompt","message":"a question long enough"}` + "\n" + `{"type":"compact","customInstructions":"short"}`,
		`{"type":"prompt","message":"x"}` + "\n" + `{"type":"abort_retry"}` + "\n" + `{"type":"set_auto_compaction","enabled":false}`,
		`{"type":"prompt"`,
	} {
		f.Add([]byte(seed))
	}
	script := scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{
		{StopReason: "error", ErrorMessage: "503 Service Unavailable", LatencyMs: 100},
		{StopReason: "stop", Text: "done"},
		{StopReason: "error", ErrorMessage: "prompt is too long: 213462 tokens > 200000 maximum"},
	}}
	const sentinel = `{"id":"sentinel","type":"get_state"}` + "\n"
	f.Fuzz(func(t *testing.T, input []byte) {
		synctest.Test(t, func(t *testing.T) {
			cfg := policy.ReferenceConfig()
			cfg.Compaction.KeepRecentTokens = 5
			s, err := session.New(scripted.New(script), session.WithModel(scripted.DefaultModel), session.WithConfig(cfg))
			require.NoError(t, err)
			defer s.Close()
			in := append(append(bytes.Clone(input), '\n'), sentinel...)
			var out bytes.Buffer
			require.NoError(t, rpc.Serve(context.Background(), s, bytes.NewReader(in), &out))

			want := 1 // the sentinel's
			for line := range bytes.SplitSeq(input, []byte("\n")) {
				line = bytes.TrimSuffix(line, []byte("\r"))
				if len(bytes.Trim(line, " \t\r")) > 0 {
					want++
				}
			}
			require.True(t, out.Len() == 0 || bytes.HasSuffix(out.Bytes(), []byte("\n")), "output ends in a newline")
			responses, sentinelAnswered := 0, false
			for line := range bytes.SplitSeq(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")) {
				require.True(t, json.Valid(line), "not JSON: %q", line)
				require.True(t, utf8.Valid(line), "not UTF-8: %q", line)
				require.False(t, bytes.ContainsAny(line, "\u2028\u2029"), "a raw line separator: %q", line)
				var obj struct {
					ID      json.RawMessage `json:"id"`
					Type    string          `json:"type"`
					Success bool            `json:"success"`
				}
				require.NoError(t, json.Unmarshal(line, &obj), "%q", line)
				require.NotEmpty(t, obj.Type, "every line has a type: %q", line)
				if obj.Type == "response" {
					responses++
					if string(obj.ID) == `"sentinel"` && obj.Success {
						sentinelAnswered = true
					}
				}
			}
			require.Equal(t, want, responses, "one response per line that is not blank; output:\n%s", out.String())
			require.True(t, sentinelAnswered, "the line after the input was answered")
		})
	})
}
