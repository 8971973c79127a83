package classify

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// ProviderError is what a provider's JSON error body says, in the shapes
// the common providers use:
//
//	Anthropic          {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}
//	OpenAI and kin     {"error":{"message":"…","type":"…","code":"…","param":null}}
//	Google / Vertex    {"error":{"code":429,"message":"…","status":"RESOURCE_EXHAUSTED"}}
//	Bedrock            {"message":"…"} (the type in the x-amzn-errortype header)
//	OpenRouter         {"error":{"message":"…","code":502,"metadata":{"raw":"<the upstream body>"}}}
//
// A message that is itself a JSON body (Google's habit when it relays
// another service, OpenRouter's raw upstream body) is read in turn, and the
// innermost body wins.
type ProviderError struct {
	// Status is an HTTP status the body states (Google's numeric code); 0
	// when it states none.
	Status int
	// Type is the provider's error type or code name, such as
	// "overloaded_error", "insufficient_quota" or "RESOURCE_EXHAUSTED".
	Type string
	// Message is the provider's own message.
	Message string
}

// maxBodyDepth bounds how deep ParseBody follows bodies inside messages.
const maxBodyDepth = 4

// ParseBody reads a provider's error body. It reports false when data is
// not a JSON object in one of the shapes ProviderError lists.
func ParseBody(data []byte) (ProviderError, bool) {
	return parseBody(data, 0)
}

func parseBody(data []byte, depth int) (ProviderError, bool) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' || depth > maxBodyDepth {
		return ProviderError{}, false
	}
	var top struct {
		Type    *string         `json:"type"`
		Message *string         `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &top) != nil {
		return ProviderError{}, false
	}
	var pe ProviderError
	switch {
	case len(top.Error) > 0 && top.Error[0] == '{':
		var e struct {
			Type     string          `json:"type"`
			Message  string          `json:"message"`
			Code     json.RawMessage `json:"code"`
			Status   string          `json:"status"`
			Metadata struct {
				Raw json.RawMessage `json:"raw"`
			} `json:"metadata"`
		}
		if json.Unmarshal(top.Error, &e) != nil {
			return ProviderError{}, false
		}
		pe.Message = e.Message
		pe.Type = e.Type
		code := strings.Trim(string(e.Code), `"`)
		if n, err := strconv.Atoi(code); err == nil && e.Code[0] != '"' {
			if n >= 100 && n <= 599 {
				pe.Status = n
			}
		} else if code != "" && code != "null" {
			pe.Type = code // OpenAI: the code is the more precise name
		}
		if e.Status != "" && pe.Type == "" {
			pe.Type = e.Status
		}
		if raw := unquote(e.Metadata.Raw); raw != nil {
			if inner, ok := parseBody(raw, depth+1); ok {
				return merge(inner, pe), true
			}
		}
	case len(top.Error) > 0 && top.Error[0] == '"':
		// {"error":"…"}: a message alone.
		if json.Unmarshal(top.Error, &pe.Message) != nil {
			return ProviderError{}, false
		}
	case top.Message != nil:
		pe.Message = *top.Message
		if top.Type != nil {
			pe.Type = *top.Type
		}
	default:
		return ProviderError{}, false
	}
	if inner, ok := parseBody([]byte(pe.Message), depth+1); ok {
		return merge(inner, pe), true
	}
	if pe.Message == "" && pe.Type == "" && pe.Status == 0 {
		return ProviderError{}, false
	}
	return pe, true
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
