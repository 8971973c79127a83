package transcript

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/internal/wiretext"
)

// The text rule: a message holds only text that JSON can carry as it is.
// Each byte of a string that is not valid UTF-8 becomes U+FFFD, and a tool
// call's arguments (raw JSON) get the same, their lone surrogate escapes
// \ufffd, and U+2028 and U+2029 escaped (package internal/wiretext). The
// engine (package policy) takes every message from outside under it, and
// the block codec applies it when it writes and reads (Block.MarshalJSON),
// so that the runtime context, the events, the history and the RPC lines
// all hold the same text.

// Clean returns m under the text rule, and whether that changed it; m
// itself (sharing its content) when it did not. A cost that is not a
// finite number (NaN, an infinity), which JSON cannot carry, becomes 0.
func (m Message) Clean() (Message, bool) {
	if m.underRule() {
		return m, false
	}
	return m.clean()
}

// clean is Clean without its shortcut: every field through the rule
// (FuzzUnderRule holds the shortcut to it).
func (m Message) clean() (Message, bool) {
	var c cleaner
	m.ID = c.str(m.ID)
	m.Role = Role(c.str(string(m.Role)))
	m.Content = validBlocks(m.Content, &c)
	m.ToolCallID = c.str(m.ToolCallID)
	m.ToolName = c.str(m.ToolName)
	m.StopReason = StopReason(c.str(string(m.StopReason)))
	m.ErrorMessage = c.str(m.ErrorMessage)
	m.Provider = c.str(m.Provider)
	m.Model = c.str(m.Model)
	m.ErrorType = c.str(m.ErrorType)
	m.Headers = validHeaders(m.Headers, &c)
	if u := m.Usage; u != nil && u.Cost != nil {
		cost := *u.Cost
		for _, f := range []*float64{&cost.Input, &cost.Output, &cost.CacheRead, &cost.CacheWrite, &cost.Total} {
			if math.IsNaN(*f) || math.IsInf(*f, 0) {
				*f, c.changed = 0, true
			}
		}
		if cost != *u.Cost {
			v := *u
			v.Cost = &cost
			m.Usage = &v
		}
	}
	return m, c.changed
}

// underRule reports whether m is under the text rule already, as nearly
// every message is: Clean then returns it as it is, having checked each
// string once, rather than rewriting every field of a copy. It reads what
// Clean cleans (TestUnderRuleSeesEveryField).
func (m *Message) underRule() bool {
	if !utf8.ValidString(m.ID) || !utf8.ValidString(string(m.Role)) || !utf8.ValidString(m.ToolCallID) ||
		!utf8.ValidString(m.ToolName) || !utf8.ValidString(string(m.StopReason)) || !utf8.ValidString(m.ErrorMessage) ||
		!utf8.ValidString(m.Provider) || !utf8.ValidString(m.Model) || !utf8.ValidString(m.ErrorType) {
		return false
	}
	for i := range m.Content {
		if !m.Content[i].underRule() {
			return false
		}
	}
	for k, v := range m.Headers {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return false
		}
	}
	if u := m.Usage; u != nil && u.Cost != nil {
		c := u.Cost
		for _, f := range [...]float64{c.Input, c.Output, c.CacheRead, c.CacheWrite, c.Total} {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return false
			}
		}
	}
	return true
}

// underRule reports whether b is under the text rule already (see
// Message.underRule).
func (b *Block) underRule() bool {
	if !utf8.ValidString(string(b.Type)) || !utf8.ValidString(b.Text) || !utf8.ValidString(b.TextSignature) ||
		!utf8.ValidString(b.Data) || !utf8.ValidString(b.MimeType) || !utf8.ValidString(b.Thinking) ||
		!utf8.ValidString(b.ThinkingSignature) || !utf8.ValidString(b.ID) || !utf8.ValidString(b.Name) {
		return false
	}
	if len(b.Arguments) == 0 {
		return true
	}
	v := wiretext.JSON(b.Arguments)
	return len(v) == len(b.Arguments) && &v[0] == &b.Arguments[0]
}

// cleaner applies the rule and remembers whether it changed anything.
type cleaner struct{ changed bool }

// str is wiretext.String, which changes the length of what it changes.
func (c *cleaner) str(s string) string {
	v := wiretext.String(s)
	c.changed = c.changed || len(v) != len(s)
	return v
}

// json is wiretext.JSON, which returns its argument when it changes
// nothing.
func (c *cleaner) json(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	v := wiretext.JSON(raw)
	c.changed = c.changed || len(v) != len(raw) || &v[0] != &raw[0]
	return v
}

// CleanMessages returns ms with each message under the text rule (see
// Message.Clean); ms itself when all of them are.
func CleanMessages(ms []Message) []Message {
	var out []Message
	for i, m := range ms {
		if v, changed := m.Clean(); changed {
			if out == nil {
				out = slices.Clone(ms)
			}
			out[i] = v
		}
	}
	if out == nil {
		return ms
	}
	return out
}

// validBlocks returns bs with each block under the rule; bs itself when all
// of them are. c learns whether anything changed.
func validBlocks(bs []Block, c *cleaner) []Block {
	var out []Block
	for i, b := range bs {
		if v, changed := b.valid(); changed {
			if out == nil {
				out = slices.Clone(bs)
			}
			out[i] = v
			c.changed = true
		}
	}
	if out == nil {
		return bs
	}
	return out
}

// valid returns b with every string field and its arguments under the
// rule, and whether that changed it.
func (b Block) valid() (Block, bool) {
	var c cleaner
	b.Type = BlockType(c.str(string(b.Type)))
	b.Text = c.str(b.Text)
	b.TextSignature = c.str(b.TextSignature)
	b.Data = c.str(b.Data)
	b.MimeType = c.str(b.MimeType)
	b.Thinking = c.str(b.Thinking)
	b.ThinkingSignature = c.str(b.ThinkingSignature)
	b.ID = c.str(b.ID)
	b.Name = c.str(b.Name)
	b.Arguments = c.json(b.Arguments)
	return b, c.changed
}

// validHeaders returns h with its keys and values under the rule; h itself
// when they are. Two keys that differ only in bytes that are not UTF-8
// become one, with the value of the later key in byte order, as a JSON
// reader of h written with both would keep. c learns whether anything
// changed.
func validHeaders(h map[string]string, c *cleaner) map[string]string {
	clean := true
	for k, v := range h {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			clean = false
			break
		}
	}
	if clean {
		return h
	}
	c.changed = true
	out := make(map[string]string, len(h))
	for _, k := range slices.Sorted(maps.Keys(h)) {
		out[wiretext.String(k)] = wiretext.String(h[k])
	}
	return out
}
