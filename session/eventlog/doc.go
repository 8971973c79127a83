// Package eventlog logs a session's events through log/slog, with stable
// attribute names and the levels an operator expects: a retry is a
// warning, an exhausted chain an error, a state change a debug line. One
// call turns it on:
//
//	defer eventlog.Subscribe(s, logger)()
//
// It logs what happened, never a secret (a credential appears by its ID)
// and never the content of a message (the prompt, the answer, a summary)
// unless WithContent asks for it. docs/observability.md lists every line
// and attribute.
//
// It is not for traces or metrics: package otelsession makes those.
package eventlog
