package policy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/policy"
)

// TestRetryNextIsTheTable: RetryConfig.Next, which a summarizer's call
// retries by, answers as the table's rules for a run that failed so:
// retry, exhaust, exhaust_elapsed, a hint over the cap, a class the chain
// does not retry.
func TestRetryNextIsTheTable(t *testing.T) {
	base := policy.RetryConfig{Enabled: true, MaxRetries: 3, BaseDelayMs: 2000}
	budget := base
	budget.MaxRetries, budget.MaxElapsedMs = -1, 10_000
	capped := base
	capped.HonorRetryAfter, capped.MaxDelayMs = true, 5_000
	off := base
	off.Enabled = false
	transient := classify.Result{Class: classify.Retryable}
	hinted := func(d time.Duration) classify.Result {
		return classify.Result{Class: classify.Retryable, RetryAfter: d, HasRetryAfter: true}
	}
	for _, c := range []struct {
		name    string
		cfg     policy.RetryConfig
		n       int
		elapsed time.Duration
		failure classify.Result
		delay   time.Duration
		retry   bool
	}{
		{"first failure: retry after the base delay", base, 1, 0, transient, 2 * time.Second, true},
		{"third: the delay doubles twice", base, 3, 0, transient, 8 * time.Second, true},
		{"fourth: the count is out", base, 4, 0, transient, 16 * time.Second, false},
		{"a usage limit is retried as the chain retries it", base, 1, 0, classify.Result{Class: classify.UsageLimit, UsageLimit: true}, 2 * time.Second, true},
		{"retries off", off, 1, 0, transient, 2 * time.Second, false},
		{"fatal", base, 1, 0, classify.Result{Class: classify.Fatal}, 2 * time.Second, false},
		{"overflow is compaction's, not a retry", base, 1, 0, classify.Result{Class: classify.Overflow}, 2 * time.Second, false},
		{"within the budget, no count limit", budget, 2, 6 * time.Second, transient, 4 * time.Second, true},
		{"the wait would end past the budget", budget, 2, 7 * time.Second, transient, 4 * time.Second, false},
		{"a hint under the cap is waited", capped, 1, 0, hinted(4 * time.Second), 4 * time.Second, true},
		{"a hint over the cap ends the chain", capped, 1, 0, hinted(6 * time.Second), 6 * time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			delay, retry := c.cfg.Next(c.n, c.elapsed, c.failure)
			assert.Equal(t, c.retry, retry)
			assert.Equal(t, c.delay, delay)
		})
	}
}
