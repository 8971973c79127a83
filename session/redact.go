package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/transcript"
)

// Redacted is what replaces a secret in everything a session emits, logs,
// appends to history and returns (see NoteSecret).
const Redacted = "[redacted]"

// minSecretLen is the length, in bytes, below which NoteSecret ignores a
// secret: a string that short is no real key (Ollama's "ollama"), and
// replacing it everywhere would mangle ordinary text.
const minSecretLen = 8

// NoteSecret tells the session whose run (or compaction) ctx belongs to
// that secret is sensitive: from then on, for the rest of the session's
// life, the session replaces secret, and its escaped forms, with Redacted
// in everything the run reports before any of it is emitted, logged,
// appended to history or returned: the messages' text,
// thinking, tool calls, error messages, error types and headers, the
// deltas (a secret split across deltas included: a delta's end that could
// begin a secret is held back until the next delta shows it is none), the
// messages' Go errors (see below), the run's error and panic, and a
// summary's text and error. An agent calls it with each key it resolves,
// before it sends the key, so that a server that echoes the key back
// (in an error body, a header, a stream) gets it written nowhere.
//
// The escaped forms are the URL query and path escapes (their hex digits
// in either case) and the JSON string escape (Go's, and with "/" as
// "\/"); in a tool call's arguments, the JSON strings are compared
// decoded, so any escape is seen through (arguments that held a secret
// are written anew, their names sorted). Other encodings (base64, a
// \uXXXX-escaped secret in a tool call's streamed deltas) are not
// recognised: redaction keeps an echoed key out of what is written, it
// cannot stop a server that holds the key from disguising it.
//
// A Go error whose text (or %+v) holds a secret is replaced by one whose
// text is redacted, that matches with errors.Is what the original matched
// and, when the original was a net.Error, is one with the same Timeout:
// errors.As no longer reaches the original's values.
//
// Secrets shorter than 8 bytes are ignored (a string that short is no
// real key, Ollama's "ollama", and replacing it everywhere would mangle
// ordinary text), and so is a ctx that is not a session's. NoteSecret is
// safe to call from any goroutine.
func NoteSecret(ctx context.Context, secret string) {
	if r, ok := ctx.Value(redactorKey{}).(*redactor); ok {
		r.add(secret)
	}
}

type redactorKey struct{}

// redactor holds the secrets a session was told of and replaces them.
type redactor struct {
	mu sync.Mutex
	// set is nil until a secret is noted: each session has a redactor,
	// and most note no secret (a session waiting out a backoff keeps
	// these 16 bytes, not the set's 64).
	set *secretSet
}

// secretSet is what a redactor holds once a secret is noted.
type secretSet struct {
	secrets  []string
	patterns []string // the secrets and their escaped forms, longest first
	replacer *strings.Replacer
}

// with returns ctx carrying r, for NoteSecret.
func (r *redactor) with(ctx context.Context) context.Context {
	return context.WithValue(ctx, redactorKey{}, r)
}

func (r *redactor) add(secret string) {
	if len(secret) < minSecretLen {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set == nil {
		r.set = &secretSet{}
	}
	set := r.set
	if slices.Contains(set.secrets, secret) {
		return
	}
	set.secrets = append(set.secrets, secret)
	forms := []string{secret}
	for _, f := range []string{url.QueryEscape(secret), url.PathEscape(secret)} {
		forms = append(forms, f, lowerHex(f))
	}
	if b, err := json.Marshal(secret); err == nil {
		f := string(b[1 : len(b)-1])
		forms = append(forms, f, strings.ReplaceAll(f, "/", `\/`))
	}
	for _, f := range forms {
		if !slices.Contains(set.patterns, f) {
			set.patterns = append(set.patterns, f)
		}
	}
	// Longest first, so that a form that holds another is replaced whole.
	slices.SortStableFunc(set.patterns, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(set.patterns))
	for _, p := range set.patterns {
		pairs = append(pairs, p, Redacted)
	}
	set.replacer = strings.NewReplacer(pairs...)
}

// state returns the patterns and their replacer; nil when there is none.
func (r *redactor) state() ([]string, *strings.Replacer) {
	if r == nil {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set == nil {
		return nil, nil
	}
	return r.set.patterns, r.set.replacer
}

// text returns s with every secret replaced.
func (r *redactor) text(s string) string {
	patterns, rep := r.state()
	return redactWith(patterns, rep, s)
}

func redactWith(patterns []string, rep *strings.Replacer, s string) string {
	if rep == nil || !containsAny(s, patterns) {
		return s
	}
	return rep.Replace(s)
}

func containsAny(s string, patterns []string) bool {
	for _, p := range patterns {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// heldPrefix is the length of the longest end of s that is a proper prefix
// of a pattern: what a stream must hold back until more of it arrives.
func heldPrefix(s string, patterns []string) int {
	held := 0
	for _, p := range patterns {
		for n := min(len(p)-1, len(s)); n > held; n-- {
			if strings.HasSuffix(s, p[:n]) {
				held = n
				break
			}
		}
	}
	return held
}

// message returns m with every secret replaced, sharing what it does not
// change with m (whose content and headers must not be changed).
func (r *redactor) message(m transcript.Message) transcript.Message {
	patterns, rep := r.state()
	if rep == nil {
		return m
	}
	red := func(s string) string { return redactWith(patterns, rep, s) }
	m.ID, m.ErrorMessage, m.ErrorType = red(m.ID), red(m.ErrorMessage), red(m.ErrorType)
	m.Provider, m.Model = red(m.Provider), red(m.Model)
	m.ToolCallID, m.ToolName = red(m.ToolCallID), red(m.ToolName)
	for name, v := range m.Headers {
		if containsAny(name, patterns) || containsAny(v, patterns) {
			headers := make(map[string]string, len(m.Headers))
			for name, v := range m.Headers {
				headers[red(name)] = red(v)
			}
			m.Headers = headers
			break
		}
	}
	for i, b := range m.Content {
		nb := r.block(b, patterns, rep)
		if nb.Text == b.Text && nb.TextSignature == b.TextSignature && nb.Data == b.Data && nb.MimeType == b.MimeType &&
			nb.Thinking == b.Thinking && nb.ThinkingSignature == b.ThinkingSignature && nb.ID == b.ID && nb.Name == b.Name &&
			string(nb.Arguments) == string(b.Arguments) {
			continue
		}
		content := slices.Clone(m.Content)
		for j := i; j < len(content); j++ {
			content[j] = r.block(content[j], patterns, rep)
		}
		m.Content = content
		break
	}
	m.Err = r.error(m.Err)
	return m
}

func (r *redactor) block(b transcript.Block, patterns []string, rep *strings.Replacer) transcript.Block {
	red := func(s string) string { return redactWith(patterns, rep, s) }
	b.Text, b.TextSignature, b.Data, b.MimeType = red(b.Text), red(b.TextSignature), red(b.Data), red(b.MimeType)
	b.Thinking, b.ThinkingSignature = red(b.Thinking), red(b.ThinkingSignature)
	b.ID, b.Name = red(b.ID), red(b.Name)
	if b.Arguments != nil && containsAny(string(b.Arguments), patterns) {
		args := json.RawMessage(rep.Replace(string(b.Arguments)))
		if !json.Valid(args) {
			// A secret outside a JSON string: the arguments are lost, not
			// the secret kept.
			args = json.RawMessage(`{"_raw":"` + Redacted + `"}`)
		}
		b.Arguments = args
	}
	if bytes.IndexByte(b.Arguments, '\\') >= 0 {
		if args, ok := redactDecoded(b.Arguments, patterns, rep); ok {
			b.Arguments = args
		}
	}
	return b
}

// redactDecoded returns the JSON raw with every secret in its strings
// (names and values) replaced, the strings compared decoded, so that no
// escape (\uXXXX, "\/") hides one; ok is false when raw holds none or is
// not JSON. The result is the same value, written anew: names sorted,
// numbers as written.
func redactDecoded(raw json.RawMessage, patterns []string, rep *strings.Replacer) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	found := false
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			if containsAny(x, patterns) {
				found = true
				return rep.Replace(x)
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				out[walk(k).(string)] = walk(e)
			}
			return out
		}
		return v
	}
	v = walk(v)
	if !found {
		return nil, false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil, false
	}
	return json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), true
}

// lowerHex is s with the hex digits of its percent escapes in lower case,
// as some servers write them (url's escapes write upper case).
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toLowerASCII(b[i+1]), toLowerASCII(b[i+2])
		}
	}
	return string(b)
}

func toLowerASCII(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// error returns err, or, when its text or that of an error it wraps holds
// a secret, a redactedError in its place.
func (r *redactor) error(err error) error {
	patterns, rep := r.state()
	if err == nil || rep == nil || !errorHolds(err, patterns) {
		return err
	}
	re := &redactedError{text: redactWith(patterns, rep, err.Error()), orig: err}
	var ne net.Error
	if errors.As(err, &ne) {
		return &redactedNetError{redactedError: re, timeout: ne.Timeout()}
	}
	return re
}

// errorHolds reports whether the text of err, or of an error in its tree,
// holds one of patterns.
func errorHolds(err error, patterns []string) bool {
	if containsAny(err.Error(), patterns) || containsAny(fmt.Sprintf("%+v", err), patterns) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if next := u.Unwrap(); next != nil {
			return errorHolds(next, patterns)
		}
	case interface{ Unwrap() []error }:
		for _, next := range u.Unwrap() {
			if next != nil && errorHolds(next, patterns) {
				return true
			}
		}
	}
	return false
}

// panicValue returns v, or its redacted text when that holds a secret.
func (r *redactor) panicValue(v any) any {
	patterns, rep := r.state()
	if v == nil || rep == nil {
		return v
	}
	if s := fmt.Sprint(v); containsAny(s, patterns) {
		return rep.Replace(s)
	}
	return v
}

// redactedError stands in for an error whose text held a secret: its text
// is redacted, and it matches what the original matched with errors.Is,
// without handing out the original.
type redactedError struct {
	text string
	orig error
}

func (e *redactedError) Error() string { return e.text }

// Is reports whether the original error matches target.
func (e *redactedError) Is(target error) bool { return errors.Is(e.orig, target) }

// redactedNetError is a redactedError of a net.Error: the classifier still
// reads its Timeout.
type redactedNetError struct {
	*redactedError
	timeout bool
}

func (e *redactedNetError) Timeout() bool { return e.timeout }

// Temporary is deprecated in net.Error; it says what Timeout says.
func (e *redactedNetError) Temporary() bool { return e.timeout }

var _ net.Error = (*redactedNetError)(nil)

// runRedaction redacts the events of one run, holding back the end of a
// delta that could begin a secret.
type runRedaction struct {
	r *redactor

	mu   sync.Mutex
	held []events.MessageUpdate // one per (kind, index) with text held back
}

// each calls emit with ev redacted, preceded by the held-back deltas it
// releases.
func (rr *runRedaction) each(ev events.Event, emit func(events.Event)) {
	patterns, rep := rr.r.state()
	rr.mu.Lock()
	if rep == nil && len(rr.held) == 0 {
		rr.mu.Unlock()
		emit(ev)
		return
	}
	var out []events.Event
	switch e := ev.(type) {
	case events.MessageUpdate:
		e.Message = rr.r.message(e.Message)
		i := slices.IndexFunc(rr.held, func(h events.MessageUpdate) bool {
			return h.Delta.Kind == e.Delta.Kind && h.Delta.Index == e.Delta.Index
		})
		text := e.Delta.Text
		if i >= 0 {
			text = rr.held[i].Delta.Text + text
			rr.held = slices.Delete(rr.held, i, i+1)
		}
		text = redactWith(patterns, rep, text)
		if n := heldPrefix(text, patterns); n > 0 {
			h := e
			h.Delta.Text = text[len(text)-n:]
			rr.held = append(rr.held, h)
			text = text[:len(text)-n]
		}
		if text != "" {
			e.Delta.Text = text
			out = append(out, e)
		}
	default:
		// Any other event ends the deltas before it: what was held back
		// is no secret, and goes out first.
		for _, h := range rr.held {
			out = append(out, h)
		}
		rr.held = nil
		out = append(out, rr.r.event(ev))
	}
	rr.mu.Unlock()
	for _, e := range out {
		emit(e)
	}
}

// event returns ev with its messages redacted.
func (r *redactor) event(ev events.Event) events.Event {
	switch e := ev.(type) {
	case events.MessageStart:
		e.Message = r.message(e.Message)
		return e
	case events.MessageUpdate:
		e.Message = r.message(e.Message)
		e.Delta.Text = r.text(e.Delta.Text)
		return e
	case events.MessageEnd:
		e.Message = r.message(e.Message)
		return e
	case events.AgentEnd:
		if len(e.Messages) > 0 {
			msgs := make([]transcript.Message, len(e.Messages))
			for i, m := range e.Messages {
				msgs[i] = r.message(m)
			}
			e.Messages = msgs
		}
		return e
	}
	return ev
}
