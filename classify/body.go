package classify

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// ProviderError is what a provider's JSON error body says, in the shapes
// the common providers use:
//
//	Anthropic          {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}
//	OpenAI and kin     {"error":{"message":"…","type":"…","code":"…","param":null}}
//	OpenAI Responses   {"type":"response.failed","response":{"error":{"code":"…","message":"…"}}}
//	Google / Vertex    {"error":{"code":429,"message":"…","status":"RESOURCE_EXHAUSTED"}}
//	Bedrock            {"message":"…"}, {"__type":"…#ThrottlingException","Message":"…"}
//	OpenRouter         {"error":{"message":"…","code":502,"metadata":{"raw":"<the upstream body>"}}}
//	a bare message     {"error":"…"}
//
// A JSON array of bodies (Gemini's habit: [{"error":{…}}]) is read as its
// first element that is one. Google's RetryInfo in the error's details
// ({"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"})
// is the RetryDelay.
//
// Bodies inside bodies are unwrapped: a message that is itself a JSON body,
// as a string (Google's habit when it relays another service), an error
// object that holds another error (a gateway relaying an upstream's body),
// OpenRouter's metadata.raw. The innermost body wins and an outer one fills
// the fields it leaves empty; an upstream's raw text that is not a body
// follows the outer message.
type ProviderError struct {
	// Status is an HTTP status the body states (Google's numeric code, or a
	// code such as "429" given as a string); 0 when it states none.
	Status int
	// Type is the provider's most precise name for the error: its error
	// code when that is a name (OpenAI's "insufficient_quota"), else its
	// error type ("overloaded_error"), Google's status
	// ("RESOURCE_EXHAUSTED") or Bedrock's exception ("ThrottlingException").
	Type string
	// Message is the provider's own message.
	Message string
	// RetryDelay is the retryDelay of a google.rpc.RetryInfo in the
	// error's details, as the body gives it ("30s", "1.5s"); "" when there
	// is none.
	RetryDelay string
}

// String renders the error as one line of error text, the way a session's
// failed message reads: "529 overloaded_error: Overloaded", each part only
// when the body states it, and " (retryDelay: 30s)" after them when the
// body has a RetryDelay, a form RetryAfter reads.
func (pe ProviderError) String() string {
	var b strings.Builder
	if pe.Status != 0 {
		b.WriteString(strconv.Itoa(pe.Status))
	}
	if pe.Type != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(pe.Type)
		if pe.Message != "" {
			b.WriteByte(':')
		}
	}
	if pe.Message != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(pe.Message)
	}
	if pe.RetryDelay != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("(retryDelay: " + pe.RetryDelay + ")")
	}
	return b.String()
}

// maxBodyDepth bounds how deep ParseBody follows bodies inside bodies.
const maxBodyDepth = 4

// maxBodyArray bounds how many elements of an array ParseBody tries.
const maxBodyArray = 16

// ParseBody reads a provider's error body. It reports false when data is
// not a JSON object in one of the shapes ProviderError lists (or an array
// holding one), or is one that states nothing (no status, type or
// message): text to be classified as text.
func ParseBody(data []byte) (ProviderError, bool) {
	return parseBody(data, 0)
}

func parseBody(data []byte, depth int) (ProviderError, bool) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' && depth <= maxBodyDepth {
		return parseBodyArray(data, depth)
	}
	if len(data) == 0 || data[0] != '{' || depth > maxBodyDepth {
		return ProviderError{}, false
	}
	var top struct {
		Type     *string         `json:"type"`
		AWSType  *string         `json:"__type"`
		Message  *string         `json:"message"`
		Error    json.RawMessage `json:"error"`
		Response json.RawMessage `json:"response"`
	}
	if json.Unmarshal(data, &top) != nil {
		return ProviderError{}, false
	}
	var pe ProviderError
	switch {
	case isObject(top.Error):
		var ok bool
		if pe, ok = parseErrorObject(top.Error, depth); !ok {
			return ProviderError{}, false
		}
	case len(top.Error) > 0 && top.Error[0] == '"':
		// {"error":"…"}: a message alone.
		if json.Unmarshal(top.Error, &pe.Message) != nil {
			return ProviderError{}, false
		}
	case isObject(top.Response):
		// The Responses API's response.failed event: the response's error.
		return parseBody(top.Response, depth+1)
	case top.Message != nil:
		pe.Message = *top.Message
		switch {
		case top.AWSType != nil:
			pe.Type = awsType(*top.AWSType)
		case top.Type != nil && *top.Type != "error":
			pe.Type = *top.Type
		}
	default:
		return ProviderError{}, false
	}
	if inner, ok := parseBody([]byte(pe.Message), depth+1); ok {
		pe = merge(inner, pe)
	}
	if pe.Message == "" && pe.Type == "" && pe.Status == 0 {
		return ProviderError{}, false
	}
	return pe, true
}

// parseBodyArray reads a JSON array of bodies: its first element, among
// the first maxBodyArray, that is one.
func parseBodyArray(data []byte, depth int) (ProviderError, bool) {
	var elems []json.RawMessage
	if json.Unmarshal(data, &elems) != nil {
		return ProviderError{}, false
	}
	for i, e := range elems {
		if i == maxBodyArray {
			break
		}
		if pe, ok := parseBody(e, depth+1); ok {
			return pe, true
		}
	}
	return ProviderError{}, false
}

// maxRetryDelay is the longest RetryDelay ParseBody keeps, in bytes: a
// real one is a few ("58.934310785s").
const maxRetryDelay = 32

// retryInfoType is the @type of Google's RetryInfo detail.
const retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"

// retryDelay is the retryDelay of the first RetryInfo in details (an
// error's details array) that is a duration RetryAfter reads, of at most
// maxRetryDelay bytes; "" when there is none.
func retryDelay(details json.RawMessage) string {
	var ds []struct {
		Type       string `json:"@type"`
		RetryDelay string `json:"retryDelay"`
	}
	if json.Unmarshal(details, &ds) != nil {
		return ""
	}
	for _, d := range ds {
		v := strings.TrimSpace(d.RetryDelay)
		if _, ok := parseStrictSpan(v, time.Time{}); ok && d.Type == retryInfoType && len(v) <= maxRetryDelay {
			return v
		}
	}
	return ""
}

// parseErrorObject reads the object under "error": its type, code, status
// and message, and the bodies it carries (another "error" inside it,
// OpenRouter's metadata.raw).
func parseErrorObject(data json.RawMessage, depth int) (ProviderError, bool) {
	var e struct {
		Type     *string         `json:"type"`
		Message  *string         `json:"message"`
		Code     json.RawMessage `json:"code"`
		Status   json.RawMessage `json:"status"`
		Error    json.RawMessage `json:"error"`
		Details  json.RawMessage `json:"details"`
		Metadata *struct {
			Raw json.RawMessage `json:"raw"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &e) != nil {
		return ProviderError{}, false
	}
	var pe ProviderError
	if e.Message != nil {
		pe.Message = *e.Message
	}
	if e.Type != nil {
		pe.Type = *e.Type
	}
	pe.RetryDelay = retryDelay(e.Details)
	// A number in the HTTP range, as a number or a string, is a status;
	// a code that is a name is more precise than the type; a status that
	// is a name (Google's) stands in for a missing type.
	if code, isName := status(e.Code, &pe.Status); isName {
		pe.Type = code
	}
	if name, isName := status(e.Status, &pe.Status); isName && pe.Type == "" {
		pe.Type = name
	}
	if len(e.Error) > 0 {
		if inner, ok := parseBody(data, depth+1); ok {
			pe = merge(inner, pe)
		}
	}
	if e.Metadata != nil {
		if raw := unquote(e.Metadata.Raw); len(raw) > 0 {
			if inner, ok := parseBody(raw, depth+1); ok {
				pe = merge(inner, pe)
			} else if text := strings.TrimSpace(string(raw)); text != "" {
				pe.Message = strings.TrimSpace(pe.Message + ": " + text)
			}
		}
	}
	return pe, true
}

// status reads a code or status field: a number in the HTTP range, as a
// number or a string, is stored in *st; a string that is no such number
// is returned as a name.
func status(raw json.RawMessage, st *int) (name string, isName bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	v := string(raw)
	quoted := raw[0] == '"'
	if quoted && json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 100 && n <= 599 {
		*st = n
		return "", false
	}
	return v, quoted && v != ""
}

// awsType is the exception name in an AWS __type:
// "com.amazon.coral.service#ThrottlingException" → "ThrottlingException".
func awsType(t string) string {
	if i := strings.LastIndexByte(t, '#'); i >= 0 {
		t = t[i+1:]
	}
	t, _, _ = strings.Cut(t, ":")
	return t
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// merge takes the inner body's fields, and the outer's where the inner has
// none.
func merge(inner, outer ProviderError) ProviderError {
	if inner.Status == 0 {
		inner.Status = outer.Status
	}
	if inner.Type == "" {
		inner.Type = outer.Type
	}
	if inner.Message == "" {
		inner.Message = outer.Message
	}
	if inner.RetryDelay == "" {
		inner.RetryDelay = outer.RetryDelay
	}
	return inner
}

// unquote returns the JSON text raw holds: raw itself when it is an
// object, the string's content when it is a string, nil otherwise.
func unquote(raw json.RawMessage) []byte {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return nil
	case raw[0] == '{':
		return raw
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return []byte(s)
		}
	}
	return nil
}
