package policy

// Credential is one way to authenticate with a provider. It never holds
// its secret, only where the secret is (Secret), so it may go anywhere a
// request goes: a session.RunRequest, a SummaryRequest, an event, a log.
type Credential struct {
	// ID names the credential.
	ID string `json:"id"`
	// Provider is the provider it authenticates with.
	Provider string `json:"provider"`
	// Type is its kind (such as "api_key" or "oauth"); a usage limit only
	// switches to a credential of the same type.
	Type string `json:"type"`
	// BaseURL, when set, is the endpoint the credential belongs to; empty
	// means any endpoint of the provider.
	BaseURL string `json:"baseUrl,omitempty"`
	// Secret says where the credential's key or token is, never the
	// secret itself: "env:NAME" for an environment variable, or whatever
	// the embedder's secret resolver reads. An agent resolves it at call
	// time, so the secret is in no credential, history, snapshot, event or
	// log.
	Secret string `json:"secret,omitempty"`
}
