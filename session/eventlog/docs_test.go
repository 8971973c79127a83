package eventlog_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/session/eventlog"
)

// TestDocsListEveryAttribute: docs/observability.md names every attribute
// a line can have.
func TestDocsListEveryAttribute(t *testing.T) {
	doc, err := os.ReadFile("../../docs/observability.md")
	require.NoError(t, err)
	for _, k := range []string{
		eventlog.KeySession, eventlog.KeyStateFrom, eventlog.KeyStateTo, eventlog.KeyStateEvent, eventlog.KeyAttempt,
		eventlog.KeyMaxAttempts, eventlog.KeyDelay, eventlog.KeyRetryOut, eventlog.KeyErrorClass, eventlog.KeyErrorCode,
		eventlog.KeyErrorText, eventlog.KeyProvider, eventlog.KeyModel, eventlog.KeyCredential, eventlog.KeyReason,
		eventlog.KeyCompactOut, eventlog.KeyTokensIn, eventlog.KeyWillRetry, eventlog.KeySummary, eventlog.KeyTurnOut,
		eventlog.KeyMessageID, eventlog.KeyRole, eventlog.KeyStopReason, eventlog.KeyText, eventlog.KeyMessages,
		eventlog.KeyInput, eventlog.KeyOutput, eventlog.KeyDeltaKind, eventlog.KeyDeltaIndex, eventlog.KeyDeltaText,
		eventlog.KeyDropped,
	} {
		assert.Contains(t, string(doc), "`"+k+"`", "docs/observability.md lists %s", k)
	}
}
