package session

import (
	"context"

	"github.com/agentfsm/agentfsm/policy"
)

// Summarizer condenses the messages a compaction cuts. It must honour ctx:
// AbortCompaction and Abort cancel it. policy.DigestSummarizer is the one the
// library ships.
type Summarizer interface {
	Summarize(ctx context.Context, req policy.SummaryRequest) (policy.Summary, error)
}
