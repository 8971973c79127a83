package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/internal/wiretext"
)

// The engine keeps and hands on only text that JSON can carry as it is:
// what it takes from outside (an agent's messages and events, a
// summarizer's summary and details, the errors of agents, summarizers and
// histories, a credential's ID, a prompt) it takes under the rule of
// package wiretext: each byte of a string that is not valid UTF-8 becomes
// U+FFFD, and a tool call's arguments (raw JSON) get the same, their lone
// surrogate escapes \ufffd, and U+2028 and U+2029 escaped. So the runtime
// context, the events, the history and the RPC lines all hold the same
// text, and a session restored from its history has the context the
// session that wrote it had. The block codec applies the same rule when it
// writes and reads (Block.MarshalJSON), for blocks that never went through
// an engine.

// validDetails returns a summary's details as the rule has them: details
// whose JSON holds text the rule changes become that JSON, changed, as a
// json.RawMessage; others stay as they are. Details that JSON cannot
// encode are an error that says why.
func validDetails(d any) (any, error) {
	if d == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("policy: the summary's details cannot be written as JSON: %w", err)
	}
	raw := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if v := wiretext.JSON(raw); len(v) != len(raw) || &v[0] != &raw[0] {
		return json.RawMessage(v), nil
	}
	return d, nil
}

// validSetup refuses a session ID or a model whose text is not valid UTF-8:
// they are the embedder's own, and a session's identity is not to be
// changed behind its back.
func validSetup(s Setup) error {
	for _, f := range []struct{ name, value string }{
		{"session ID", s.SessionID}, {"model provider", s.Model.Provider}, {"model ID", s.Model.ID}, {"model base URL", s.Model.BaseURL},
	} {
		if !utf8.ValidString(f.value) {
			return fmt.Errorf("policy: %s %q is not valid UTF-8", f.name, f.value)
		}
	}
	return nil
}
