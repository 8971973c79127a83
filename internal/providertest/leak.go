package providertest

import (
	"net/http"
	"reflect"
)

// HoldsHTTP reports whether err, or an error it wraps (errors.Unwrap, and
// Unwrap() []error), holds an *http.Request, an *http.Response or an
// http.Header in its fields, however deep: what an adapter's error must
// not hold, as a request's header holds the key and a response's the
// whole body.
func HoldsHTTP(err error) bool {
	seen := map[uintptr]bool{}
	var walk func(error) bool
	walk = func(err error) bool {
		if err == nil {
			return false
		}
		if holds(reflect.ValueOf(err), seen, 0) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			return walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(err)
}

var (
	requestType  = reflect.TypeFor[*http.Request]()
	responseType = reflect.TypeFor[*http.Response]()
	headerType   = reflect.TypeFor[http.Header]()
)

func holds(v reflect.Value, seen map[uintptr]bool, depth int) bool {
	if !v.IsValid() || depth > 12 {
		return false
	}
	switch v.Type() {
	case requestType, responseType:
		return !v.IsNil()
	case headerType:
		return v.Len() > 0
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return false
		}
		seen[v.Pointer()] = true
		return holds(v.Elem(), seen, depth+1)
	case reflect.Interface:
		return holds(v.Elem(), seen, depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if holds(v.Field(i), seen, depth+1) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range min(v.Len(), 64) {
			if holds(v.Index(i), seen, depth+1) {
				return true
			}
		}
	}
	return false
}
