// Package classify decides what an assistant message's error means for the
// recovery policy: not an error, a retryable error, a usage limit, a context
// overflow, or a fatal error.
//
// It imports nothing from this module and reads no clock: the current time,
// where a retry hint needs it, is an argument. It decides; it does not act
// (retrying and compacting belong to package policy).
//
// Section numbers (§2.3) in this package's comments are those of
// docs/policy.md.
package classify
