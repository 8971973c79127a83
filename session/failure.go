package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transcript"
)

// FailedMessage is the assistant message of a model call that failed: with
// an HTTP response (status, its header and body) or before one (status 0,
// err the transport's error). An Agent over any provider client reports a
// failed call with it; the session then classifies the message on its
// typed facts before its text:
//
//   - HTTPStatus is the status (or the one the body states);
//   - ErrorType is the provider's error type or code from the body (see
//     classify.ParseBody for the shapes read; the most precise one:
//     OpenAI's code over its type, Anthropic's error.details.error_code
//     over its type), or Bedrock's x-amzn-errortype header. A spend or
//     quota code (insufficient_quota, billing_hard_limit_reached,
//     enforced_spend_limit_reached, billing_error) thus reaches the
//     classifier as a type, which it reads before the text;
//   - Headers keeps the headers that carry retry hints (retry-after,
//     retry-after-ms, x-ratelimit-*, anthropic-ratelimit-*) and request IDs,
//     with lower-case names: the first value of each, cut to 256 bytes,
//     and at most 64 of them (the retry hints and request IDs first, then
//     by name);
//   - ErrorMessage is short: "529 overloaded_error: Overloaded" (and
//     " (retryDelay: 30s)" when the body has a Google RetryInfo, which the
//     classifier reads as a retry hint), the body's text when it is not a
//     known shape (cut to 500 characters), or err's;
//     whatever the body, at most 2048 bytes, cut on a UTF-8
//     boundary and ended with "…" when cut. The classifier reads the body's
//     type and message, which come first;
//   - Err is err.
//
// The message has no ID, provider, model or time: the session fills them.
func FailedMessage(status int, header http.Header, body []byte, err error) transcript.Message {
	m := transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError, HTTPStatus: status, Err: err}
	m.Headers = keptHeaders(header)
	if t := m.Headers["x-amzn-errortype"]; t != "" {
		m.ErrorType, _, _ = strings.Cut(t, ":")
	}
	pe, parsed := classify.ParseBody(body)
	if parsed {
		if m.HTTPStatus == 0 {
			m.HTTPStatus = pe.Status
		}
		if pe.Type != "" {
			m.ErrorType = pe.Type
		}
		if code := detailsCode(body); code != "" {
			m.ErrorType = code
		}
	}
	var parts []string
	if m.HTTPStatus != 0 {
		parts = append(parts, fmt.Sprint(m.HTTPStatus))
	}
	switch {
	case parsed:
		if m.ErrorType != "" {
			parts = append(parts, m.ErrorType+":")
		}
		parts = append(parts, pe.Message)
	case len(strings.TrimSpace(string(body))) > 0:
		parts = append(parts, clipText(strings.TrimSpace(string(body)), 500))
	case err != nil:
		parts = append(parts, err.Error())
	case m.HTTPStatus != 0:
		parts = append(parts, http.StatusText(m.HTTPStatus))
	}
	var hint string // kept whole however long the message: the classifier reads it
	if parsed && pe.RetryDelay != "" {
		hint = " (retryDelay: " + pe.RetryDelay + ")"
	}
	m.ErrorMessage = clipBytes(strings.TrimSuffix(strings.Join(parts, " "), ":"), maxErrorMessage-len(hint)) + hint
	if m.ErrorMessage == "" {
		m.ErrorMessage = "the model call failed"
	}
	return m
}

// detailsCode is the error.details.error_code of an Anthropic error body
// (such as "enforced_spend_limit_reached", which tells a spend limit from
// a rate limit), "" when it has none.
func detailsCode(body []byte) string {
	var b struct {
		Error struct {
			Details struct {
				ErrorCode string `json:"error_code"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	return strings.TrimSpace(b.Error.Details.ErrorCode)
}

// maxErrorMessage is the longest ErrorMessage FailedMessage makes, in
// bytes.
const maxErrorMessage = 2048

// maxHeaders is the most headers FailedMessage keeps, and maxHeaderValue
// the longest value, in bytes, it keeps of one.
const (
	maxHeaders     = 64
	maxHeaderValue = 256
)

// keptHeaders are the headers of header that FailedMessage keeps, nil when
// none: the retry hints and request IDs first, then the rate-limit headers
// by name, up to maxHeaders, each value cut to maxHeaderValue bytes.
func keptHeaders(header http.Header) map[string]string {
	var first, rest []string
	values := map[string]string{}
	for name, vs := range header {
		lower := strings.ToLower(name)
		if len(vs) == 0 || !keptHeader(lower) {
			continue
		}
		if _, dup := values[lower]; dup {
			continue // a non-canonical spelling of a name already kept
		}
		values[lower] = vs[0]
		if strings.HasPrefix(lower, "x-ratelimit-") || strings.HasPrefix(lower, "anthropic-ratelimit-") {
			rest = append(rest, lower)
		} else {
			first = append(first, lower)
		}
	}
	if len(values) == 0 {
		return nil
	}
	slices.Sort(first)
	slices.Sort(rest)
	out := map[string]string{}
	for _, name := range append(first, rest...) {
		if len(out) == maxHeaders {
			break
		}
		out[name] = clipBytes(values[name], maxHeaderValue)
	}
	return out
}

// clipBytes cuts s to at most n bytes, on a UTF-8 boundary, ending it with
// "…" (counted in the n) when cut.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// keptHeader reports whether a header (lower-case name) is one the
// classifier or a reader of the error needs.
func keptHeader(name string) bool {
	switch name {
	case "retry-after", "retry-after-ms", "request-id", "x-request-id", "x-amzn-requestid", "x-amzn-errortype":
		return true
	}
	return strings.HasPrefix(name, "x-ratelimit-") || strings.HasPrefix(name, "anthropic-ratelimit-")
}

// clipText cuts s to at most n runes.
func clipText(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// MaxErrorBody is the most of an error response's body, in bytes, that
// the adapters of this module read (LimitErrorBody): the provider's error
// type and message come first, and a body past this is cut there.
const MaxErrorBody = 1 << 20

// LimitErrorBody makes the body of resp, when its status is an error
// (400 and above), end after n bytes: a reader of it sees io.EOF there,
// and closing it closes the connection, so a huge or endless error body
// costs at most n bytes. Other responses are left as they are. An adapter
// calls it on each response before its client reads the body.
func LimitErrorBody(resp *http.Response, n int64) {
	if resp == nil || resp.Body == nil || resp.StatusCode < 400 {
		return
	}
	resp.Body = limitedBody{Reader: io.LimitReader(resp.Body, n), Closer: resp.Body}
}

type limitedBody struct {
	io.Reader
	io.Closer
}

// ClipError returns err, or, when its text is longer than 2048 bytes (the
// bound of FailedMessage's ErrorMessage), a plain error of that text cut as FailedMessage cuts
// ErrorMessage: a huge error (a client's holding a whole body) is not kept
// alive in a message, at the price of what errors.Is and errors.As
// reached through it.
func ClipError(err error) error {
	if err == nil {
		return nil
	}
	if text := err.Error(); len(text) > maxErrorMessage {
		return errors.New(clipBytes(text, maxErrorMessage))
	}
	return err
}
