package classify

import "fmt"

// Class is what the classifier decides about one assistant message. The zero
// value is None.
type Class uint8

// The five classes, in this order: a caller ranges over them with
// for c := None; c.Valid(); c++.
const (
	// None: the message is not an error.
	None Class = iota
	// Retryable: a transient provider error worth another attempt.
	Retryable
	// UsageLimit: a quota or billing limit. The session retries it through
	// the usage-limit branch (switching credentials when one is free).
	UsageLimit
	// Overflow: the request did not fit the model's context window. Never
	// retried; it goes to compaction.
	Overflow
	// Fatal: an error that another attempt will not fix.
	Fatal
)

var classNames = [...]string{None: "none", Retryable: "retryable", UsageLimit: "usage_limit", Overflow: "overflow", Fatal: "fatal"}

// String returns the class's wire name ("none", "retryable", "usage_limit",
// "overflow", "fatal"), or "Class(N)" for a value outside the five.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Valid reports whether c is one of the five classes.
func (c Class) Valid() bool { return int(c) < len(classNames) }

// ParseClass returns the class with the given wire name.
func ParseClass(name string) (Class, error) {
	for i, n := range classNames {
		if n == name {
			return Class(i), nil
		}
	}
	return 0, fmt.Errorf("classify: unknown class %q", name)
}

// MarshalText implements encoding.TextMarshaler; it refuses invalid values.
func (c Class) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("classify: invalid class %d", uint8(c))
	}
	return []byte(classNames[c]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it rejects unknown
// names and leaves c unchanged when it does.
func (c *Class) UnmarshalText(text []byte) error {
	v, err := ParseClass(string(text))
	if err != nil {
		return err
	}
	*c = v
	return nil
}
