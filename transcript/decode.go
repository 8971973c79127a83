package transcript

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// decodeError is an error of reading JSON into the package's values, in
// the package's words: what was being read (a text block, a message) and,
// for a value of the wrong JSON type, which field held what where what was
// expected. It never names the codec's own types. It unwraps to the error
// of encoding/json it explains.
type decodeError struct {
	what string // "text block", `message "m": content: block 2: text block`
	msg  string
	err  error
}

func (e *decodeError) Error() string { return "transcript: " + e.what + ": " + e.msg }

func (e *decodeError) Unwrap() error { return e.err }

// decodeErr explains err, an error of decoding what. An error that is
// already a decodeError (a block's, inside a message) keeps its own
// explanation, under what.
func decodeErr(what string, err error) error {
	var de *decodeError
	if errors.As(err, &de) {
		return &decodeError{what: what + ": " + de.what, msg: de.msg, err: de.err}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		msg := fmt.Sprintf("%s where %s was expected", jsonValue(te.Value), expected(te.Type))
		if te.Field != "" {
			msg = fmt.Sprintf("field %q: %s", te.Field, msg)
		}
		return &decodeError{what: what, msg: msg, err: err}
	}
	msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "json: "), "transcript: ")
	return &decodeError{what: what, msg: msg, err: err}
}

// jsonValue names the JSON value encoding/json met: "number", "string",
// "bool", "array", "object", or a number with its text ("number 1.5").
func jsonValue(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	switch kind {
	case "bool":
		return "a boolean"
	case "array", "object":
		return "an " + kind
	case "":
		return "a value"
	}
	return "a " + kind
}

// expected names, in JSON's words, what a value of Go type t is written
// as.
func expected(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "another value"
}
