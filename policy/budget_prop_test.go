package policy_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
)

// Issue 24 §1, as a property: whatever the settings (a count limit, a time
// budget of B ms, or both; delays, cap, jitter and hints), and however long
// each failing run takes (the engine's time is data: the property's clock
// moves only as it says), a chain of failures never makes more retries
// than retry.maxRetries, never schedules a retry whose wait ends more than
// B after the chain's first failure, and always ends, exhausted, naming
// the limit that ended it.
func TestRetryChainNeverExceedsItsBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := policy.DefaultConfig()
		r := &cfg.Retry
		r.MaxElapsedMs = rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(1, 120_000)).Draw(t, "maxElapsedMs")
		minRetries := 0
		if r.MaxElapsedMs > 0 {
			minRetries = -1
		}
		r.MaxRetries = rapid.IntRange(minRetries, 12).Draw(t, "maxRetries")
		minBase := int64(0)
		if r.MaxRetries == -1 {
			minBase = 1 // Validate refuses 0 without a count limit
		}
		r.BaseDelayMs = rapid.Int64Range(minBase, 5_000).Draw(t, "baseDelayMs")
		r.MaxDelayMs = rapid.Int64Range(0, 60_000).Draw(t, "maxDelayMs")
		r.Jitter = rapid.Float64Range(0, 1).Draw(t, "jitter")
		r.HonorRetryAfter = rapid.Bool().Draw(t, "honorRetryAfter")
		e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		effects, err := e.Prompt(now, "hi")
		if err != nil {
			t.Fatal(err)
		}
		var run policy.RunID
		var start time.Time
		retries := 0
		for step := 0; ; step++ {
			if step > 10_000 {
				t.Fatalf("the chain did not end after %d runs", step)
			}
			var timer policy.TimerID
			var deadline time.Time
			for _, ef := range effects {
				switch ef.Kind {
				case policy.StartRun:
					run = ef.Run
				case policy.StartTimer:
					timer, deadline = ef.Timer, ef.Deadline
				}
			}
			if timer != 0 {
				now = deadline
				effects = e.TimerFired(now, timer)
				continue
			}
			// The run takes a while to fail (at least 1 ms: the clock moves).
			now = now.Add(time.Duration(rapid.Int64Range(1, 3_000).Draw(t, "runMs")) * time.Millisecond)
			text := service503
			if rapid.IntRange(0, 3).Draw(t, "hint") == 0 {
				text = "429 Too Many Requests: retry-after: " + rapid.SampledFrom([]string{"1", "5", "30", "90"}).Draw(t, "hintSeconds")
			}
			m := errorAnswer(text)
			effects = nil
			for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: m}, events.MessageEnd{Message: m}, events.AgentEnd{}} {
				effects = append(effects, e.RunEvent(now, run, ev)...)
			}
			effects = append(effects, e.RunReturned(now, run, policy.RunReturn{Draw: rapid.Float64Range(0, 1).Draw(t, "draw")})...)
			ended := false
			for _, ef := range effects {
				switch {
				case ef.Kind == policy.StartTimer:
					if start.IsZero() {
						start = now
					}
					if r.MaxElapsedMs > 0 && ef.Deadline.Sub(start) > time.Duration(r.MaxElapsedMs)*time.Millisecond {
						t.Fatalf("a retry ends %v after the chain's first failure, past the budget of %d ms", ef.Deadline.Sub(start), r.MaxElapsedMs)
					}
				case ef.Kind == policy.Emit:
					switch ev := ef.Event.(type) {
					case events.AutoRetryStart:
						retries++
						if r.MaxRetries >= 0 && ev.Attempt > r.MaxRetries {
							t.Fatalf("attempt %d above maxRetries %d", ev.Attempt, r.MaxRetries)
						}
						if r.MaxElapsedMs > 0 && (ev.RemainingMs != ev.MaxElapsedMs-ev.ElapsedMs || ev.DelayMs > ev.RemainingMs) {
							t.Fatalf("auto_retry_start's budget figures do not add up: %+v", ev)
						}
					case events.AutoRetryEnd:
						if ev.Outcome == events.RetryExhausted && ev.Limit != events.LimitRetries && ev.Limit != events.LimitElapsed {
							t.Fatalf("an exhausted chain names no limit: %+v", ev)
						}
						if ev.Limit == events.LimitElapsed && r.MaxElapsedMs == 0 {
							t.Fatalf("a chain without a budget ended on it: %+v", ev)
						}
					}
				case ef.Kind == policy.FinishTurn:
					ended = true
				}
			}
			if ended {
				if e.Status().State != states.Idle {
					t.Fatalf("the turn ended in state %s", e.Status().State)
				}
				if r.MaxRetries >= 0 && retries > r.MaxRetries {
					t.Fatalf("%d retries, above maxRetries %d", retries, r.MaxRetries)
				}
				return
			}
		}
	})
}
