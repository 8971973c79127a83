package otelsession_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/agentfsm/agentfsm/session/otelsession"
)

// TestDocsListEverything: docs/observability.md names every span, metric and
// attribute the package makes.
func TestDocsListEverything(t *testing.T) {
	doc, err := os.ReadFile("../../docs/observability.md")
	require.NoError(t, err)
	names := []string{
		otelsession.SpanTurn, otelsession.SpanRun, otelsession.SpanBackoff, otelsession.SpanCompaction,
		otelsession.MetricRetries, otelsession.MetricRetryChains, otelsession.MetricBackoffDuration,
		otelsession.MetricCompactions, otelsession.MetricTokenUsage, otelsession.MetricSharedLimitWaits,
	}
	for _, k := range []attribute.Key{
		otelsession.KeyConversation, otelsession.KeySystem, otelsession.KeyProviderName, otelsession.KeyOperation,
		otelsession.KeyRequestModel, otelsession.KeyResponseModel, otelsession.KeyFinishReasons, otelsession.KeyInputTokens,
		otelsession.KeyOutputTokens, otelsession.KeyTokenType, otelsession.KeyErrorType, otelsession.KeyTurnRetries,
		otelsession.KeyTurnOutcome, otelsession.KeyContinuation, otelsession.KeyAttempt, otelsession.KeyMaxAttempts,
		otelsession.KeyDelay, otelsession.KeyRetryOutcome, otelsession.KeyCredential, otelsession.KeyBackoffOutcome,
		otelsession.KeyReason, otelsession.KeyCompactOutcome, otelsession.KeyTokensBefore, otelsession.KeyTokensAfter, otelsession.KeyCompactWillRetry,
		otelsession.KeySharedLimitKey, otelsession.KeySharedLimitWhy,
	} {
		names = append(names, string(k))
	}
	for _, n := range names {
		assert.Contains(t, string(doc), "`"+n+"`", "docs/observability.md lists %s", n)
	}
}
