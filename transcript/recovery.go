package transcript

// RecoveryKind says what a recovery entry records.
type RecoveryKind string

// The recovery kinds a session writes. A history may hold kinds a later
// version added: a recovery entry of any non-empty kind is valid, and a
// reader shows one it does not know as it is.
const (
	// RecoveryRetry: a failed call is retried after DelayMs (at ResetAt
	// when the retry waits for a usage limit's reset), as attempt Attempt
	// of MaxAttempts (−1 for no count limit); Class and Error are the
	// failed call's, Credential the credential it was made with, and
	// CredentialSwitched says the credential store moved the session to
	// another credential for the retry (a usage limit).
	RecoveryRetry RecoveryKind = "retry"
	// RecoveryChainEnd: a retry chain ended after Attempt retries, with
	// Outcome (events.RetryOutcome: recovered, exhausted, cancelled,
	// failed); an exhausted chain names its Limit (retries, elapsed,
	// reset), and one that failed or was exhausted the Class and Error of
	// the call that ended it.
	RecoveryChainEnd RecoveryKind = "chainEnd"
	// RecoveryCompactionFailed: an automatic compaction for Reason
	// (overflow or threshold) ended without a summary; Error says why. A
	// compaction that succeeded is its own compaction entry.
	RecoveryCompactionFailed RecoveryKind = "compactionFailed"
	// RecoveryTurnFailed: the turn ended in Error, of Class when a failed
	// call's error ended it. A turn that failed because history could not
	// be written records nothing.
	RecoveryTurnFailed RecoveryKind = "turnFailed"
	// RecoveryFallback: the session moved from model From to model To for
	// Reason, until Until (ms since the Unix epoch, 0 for no end); a move
	// back to the primary has To the primary. It is the place of a model
	// fallback chain's record; this version writes none, and reads one.
	RecoveryFallback RecoveryKind = "fallback"
)

// Recovery is what a recovery entry records: what the session did after a
// failed call, or how its recovery ended, with the facts it decided on.
// Which fields are set depends on Kind (see the kinds); the others are
// zero and are not written.
type Recovery struct {
	Kind RecoveryKind `json:"kind"`
	// Attempt is the retry's number in its chain (the last one's, for a
	// chain's end); MaxAttempts is retry.maxRetries, −1 for no count limit.
	Attempt     int `json:"attempt,omitempty"`
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// DelayMs is how long the session waits before the retry.
	DelayMs int64 `json:"delayMs,omitempty"`
	// ResetAt is the usage limit's reset the retry waits for, in
	// milliseconds since the Unix epoch; 0 for a retry on the chain's own
	// delays.
	ResetAt int64 `json:"resetAt,omitempty"`
	// ElapsedMs is how long the chain had run at the retry's decision,
	// and MaxElapsedMs its time budget (retry.maxElapsedMs); both 0
	// without a budget.
	ElapsedMs    int64 `json:"elapsedMs,omitempty"`
	MaxElapsedMs int64 `json:"maxElapsedMs,omitempty"`
	// Class is what the classifier made of the failed call's error
	// (classify.Class).
	Class string `json:"class,omitempty"`
	// Error is the failed call's error message, or the turn's error.
	Error string `json:"error,omitempty"`
	// Provider and Model are the failed call's.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Credential is the ID (never the secret) of the credential the
	// failed call was made with; "" without a credential store.
	Credential         string `json:"credential,omitempty"`
	CredentialSwitched bool   `json:"credentialSwitched,omitempty"`
	// Outcome and Limit are a chain end's (events.RetryOutcome and
	// events.RetryLimit).
	Outcome string `json:"outcome,omitempty"`
	Limit   string `json:"limit,omitempty"`
	// Reason is a failed compaction's (a CompactionReason), or a
	// fallback's.
	Reason string `json:"reason,omitempty"`
	// From, To and Until are a fallback's.
	From  string `json:"from,omitempty"`
	To    string `json:"to,omitempty"`
	Until int64  `json:"until,omitempty"`
}
