package session

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentfsm/agentfsm/classify"
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
//     with lower-case names;
//   - ErrorMessage is short: "529 overloaded_error: Overloaded", the body's
//     text when it is not a known shape (cut to 500 characters), or err's;
//   - Err is err.
//
// The message has no ID, provider, model or time: the session fills them.
func FailedMessage(status int, header http.Header, body []byte, err error) Message {
	m := Message{Role: RoleAssistant, StopReason: classify.StopReasonError, HTTPStatus: status, Err: err}
	for name, values := range header {
		lower := strings.ToLower(name)
		if len(values) > 0 && keptHeader(lower) {
			if m.Headers == nil {
				m.Headers = map[string]string{}
			}
			m.Headers[lower] = values[0]
		}
	}
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
	m.ErrorMessage = strings.TrimSuffix(strings.Join(parts, " "), ":")
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
