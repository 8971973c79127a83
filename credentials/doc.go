// Package credentials holds the credentials a session calls its provider
// with: a CredentialStore chooses the current credential for a provider
// and session and learns when one reached its usage limit
// (MemoryCredentials keeps a list in memory and switches to the next one
// free); a SecretResolver turns a credential into its secret when an agent
// is about to call (EnvSecrets reads the environment). A credential itself
// (policy.Credential) names where its secret is, never the secret.
package credentials
