package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/transcript"
)

// agreeKinds are the outcomes a drawn call can have: the kinds of the
// library's props/agree_test.go that a run activity can give (props is
// the core module's and cannot import Temporal, so its generator is
// copied here, smaller).
var agreeKinds = []string{
	"success", "tools", "retryable", "retryable", "hinted", "usage", "usageHinted", "overflow", "overflowTwice",
	"fatal", "silent", "big", "refuse", "retryThenRefuse",
}

// drawScenario draws a story from seed: one to four turns of one to four
// calls each, and settings.
func drawScenario(seed uint64) scenarios.Scenario {
	r := rand.New(rand.NewPCG(seed, seed))
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	sc := scenarios.Scenario{
		Name:             fmt.Sprint("seed-", seed),
		BaseDelayMs:      []int64{1, 500, 2000, 5000}[r.IntN(4)],
		KeepRecentTokens: []int{0, 5}[r.IntN(2)],
		WaitForReset:     r.IntN(2) == 0,
	}
	overflow := []string{"prompt is too long: 213462 tokens > 200000 maximum", "503 overloaded: prompt is too long"}
	for i := range 1 + r.IntN(4) {
		sc.Prompts = append(sc.Prompts, fmt.Sprint("question ", i))
		for range 1 + r.IntN(4) {
			var c scripted.Call
			switch pick(agreeKinds) {
			case "success":
				c.StopReason, c.Text = "stop", "done"
			case "tools":
				sc.Calls = append(sc.Calls, scripted.Call{StopReason: "toolUse", Text: "read a file"})
				c.StopReason, c.Text = "stop", "done after tools"
			case "retryable":
				c.StopReason, c.ErrorMessage = "error", pick([]string{"503 Service Unavailable", "overloaded", "429 Too Many Requests"})
			case "hinted":
				c.StopReason, c.ErrorMessage = "error", fmt.Sprintf("429 rate limit; retry-after-ms: %d", r.IntN(20001))
			case "usage":
				c.StopReason, c.ErrorMessage = "error", "429 usage limit reached"
			case "usageHinted":
				c.StopReason, c.ErrorMessage = "error", fmt.Sprintf("429 usage limit reached; retry-after-ms: %d", r.IntN(30001))
			case "overflow":
				c.StopReason, c.ErrorMessage = "error", pick(overflow)
			case "overflowTwice":
				sc.Calls = append(sc.Calls, scripted.Call{StopReason: "error", ErrorMessage: overflow[0]})
				c.StopReason, c.ErrorMessage = "error", overflow[1]
			case "fatal":
				c.StopReason, c.ErrorMessage = "error", "401 invalid x-api-key"
			case "silent":
				c.StopReason, c.Usage = "stop", &transcript.Usage{Input: 250000}
			case "big":
				c.StopReason, c.Usage = "stop", &transcript.Usage{Input: 180000, TotalTokens: 180000}
			case "refuse":
				c = scripted.Call{Refuse: "the agent refused to start"}
			case "retryThenRefuse":
				sc.Calls = append(sc.Calls, scripted.Call{StopReason: "error", ErrorMessage: "503 Service Unavailable"})
				c = scripted.Call{Refuse: "the agent refused to start"}
			}
			sc.Calls = append(sc.Calls, c)
		}
	}
	return sc
}

// resetAt is a reset's time of day in a line: the session's clock starts
// at 2000-01-01 in a synctest bubble, the test environment's at the wall
// clock's time, so only the delay (delayMs) can agree.
var resetAt = regexp.MustCompile(`,"resetAt":"[^"]*","resetAtMs":[0-9]+`)

// clockless returns lines without their reset times, each in one JSON
// spelling: a line the workflow delivers crossed the SDK's JSON payload
// converter, which escapes <, > and & as \u003c, ... (the same JSON).
func clockless(t *testing.T, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		var v any
		require.NoError(t, json.Unmarshal([]byte(resetAt.ReplaceAllString(l, "")), &v))
		b, err := json.Marshal(v)
		require.NoError(t, err)
		out[i] = string(b)
	}
	return out
}

// Issue 27 item 7: the drivers agree, the workflow among them. Stories
// drawn at random (the kinds of props/agree_test.go: retries, hints, usage
// limits and their resets, overflows, fatal errors, agents that refuse)
// give on the workflow, on the test environment, the recovery events the
// in-process session gives. The seeds are fixed, so a failure names its
// seed and plays again the same; there is no shrinking.
func TestDriversAgreeOnTemporal(t *testing.T) {
	for seed := range uint64(40) {
		sc := drawScenario(seed)
		t.Run(sc.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				want, err := sc.Play(context.Background())
				require.NoError(t, err)
				sc.Want = want
			})
			snk, _ := playInSuite(t, sc, &temporal.Workflow{Random: scenarios.Draw})
			assert.Equal(t, clockless(t, sc.Want), clockless(t, snk.recovery(t)), "calls %+v", sc.Calls)
		})
	}
}
