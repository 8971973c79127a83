// Package owned makes copies a caller owns of what the engine and the
// session keep: values that share nothing with the originals, so that a
// caller who changes them changes nothing in the session.
package owned

import (
	"maps"
	"slices"

	"github.com/agentfsm/agentfsm/transcript"
)

// Message is m with nothing shared: its content blocks, their tool
// arguments, its usage (and cost) and its headers copied. Strings are
// immutable and Err is a value the message only reports, so they stay.
func Message(m transcript.Message) transcript.Message {
	if m.Content != nil {
		m.Content = slices.Clone(m.Content)
		for j := range m.Content {
			if a := m.Content[j].Arguments; a != nil {
				m.Content[j].Arguments = slices.Clone(a)
			}
		}
	}
	if m.Usage != nil {
		u := *m.Usage
		if u.Cost != nil {
			c := *u.Cost
			u.Cost = &c
		}
		m.Usage = &u
	}
	m.Headers = maps.Clone(m.Headers)
	return m
}
