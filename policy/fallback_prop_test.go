package policy_test

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// TestFallbackProperties drives an engine with the fallback setting through
// random turns — runs that answer, fail with transient errors, overloads,
// usage limits or fatal errors, timers, the credential store's answers and
// time passing — and checks issue 25's properties: every run calls the
// primary or a model of the list; within a turn the models go down the
// list in order, one step at a time, never back; a model_fallback moves
// one step down and names the cooldown's end; a model_revert goes back to
// the primary, and never before the cooldown of the latest switch is over.
func TestFallbackProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		list := []string{"b", "c", "d"}[:rapid.IntRange(1, 3).Draw(t, "models")]
		cfg := policy.DefaultConfig()
		cfg.Retry.MaxRetries = rapid.IntRange(0, 2).Draw(t, "maxRetries")
		cfg.Fallback = &policy.FallbackConfig{After: rapid.SampledFrom([]string{"", "exhausted", "overloaded"}).Draw(t, "after"),
			CooldownMs: rapid.SampledFrom([]int64{0, 1, 1000, 60000}).Draw(t, "cooldownMs")}
		cooldown := time.Duration(cfg.Fallback.CooldownMs) * time.Millisecond
		if cooldown == 0 {
			cooldown = 5 * time.Minute
		}
		for _, id := range list {
			cfg.Fallback.Models = append(cfg.Fallback.Models, policy.FallbackModel{ID: id})
		}
		creds := rapid.Bool().Draw(t, "credentials")
		e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: cfg, Credentials: creds})
		if err != nil {
			t.Fatal(err)
		}
		chain := append([]string{testModel.ID}, list...)
		now := t0
		var (
			run         policy.RunID
			running     bool
			timer       policy.TimerID
			deadline    time.Time
			asking      bool
			turnModels  []string // the models of the turn's runs, in order
			active      = testModel.ID
			until       time.Time
			switchedAny bool
		)
		apply := func(effects []policy.Effect) {
			for _, ef := range effects {
				switch ef.Kind {
				case policy.StartRun:
					run, running = ef.Run, true
					id := ef.Model.ID
					if !slices.Contains(chain, id) {
						t.Fatalf("a run calls %q, neither the primary nor a fallback model", id)
					}
					if id != active {
						t.Fatalf("a run calls %q while the session reports %q", id, active)
					}
					if n := len(turnModels); n > 0 {
						prev, cur := slices.Index(chain, turnModels[n-1]), slices.Index(chain, id)
						if cur < prev || cur > prev+1 {
							t.Fatalf("within a turn the runs went from %q to %q", turnModels[n-1], id)
						}
					}
					turnModels = append(turnModels, id)
				case policy.StartTimer:
					timer, deadline = ef.Timer, ef.Deadline
				case policy.MarkUsageLimit:
					asking = true
				case policy.FinishTurn:
					turnModels = nil
				case policy.Emit:
					switch ev := ef.Event.(type) {
					case events.ModelFallback:
						if ev.From != active || slices.Index(chain, ev.To) != slices.Index(chain, ev.From)+1 {
							t.Fatalf("model_fallback %s>%s while on %s (chain %v)", ev.From, ev.To, active, chain)
						}
						if !ev.Until.Equal(now.Add(cooldown)) {
							t.Fatalf("model_fallback until %s, want %s", ev.Until, now.Add(cooldown))
						}
						active, until, switchedAny = ev.To, ev.Until, true
					case events.ModelRevert:
						if ev.From != active || ev.To != testModel.ID {
							t.Fatalf("model_revert %s>%s while on %s", ev.From, ev.To, active)
						}
						if !switchedAny || now.Before(until) {
							t.Fatalf("model_revert at %s, before the cooldown's end %s", now, until)
						}
						active = testModel.ID
					}
				}
			}
			if st := e.Status(); st.ActiveModel != active {
				t.Fatalf("status names %q, the events %q", st.ActiveModel, active)
			}
		}
		answers := []transcript.Message{
			unnamed(okAnswer("fine")),
			unnamed(errorAnswer("503 Service Unavailable")),
			unnamed(errorAnswer(overloaded)),
			unnamed(errorAnswer("usage limit reached")),
			unnamed(errorAnswer("401 invalid x-api-key")),
		}
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			switch rapid.IntRange(0, 4).Draw(t, "input") {
			case 0:
				effects, err := e.Prompt(now, "hi")
				if err == nil {
					apply(effects)
				}
			case 1:
				if running {
					running = false
					m := rapid.SampledFrom(answers).Draw(t, "answer")
					for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: m}, events.MessageEnd{Message: m}, events.AgentEnd{}} {
						apply(e.RunEvent(now, run, ev))
					}
					apply(e.RunReturned(now, run, policy.RunReturn{}))
				}
			case 2:
				if !deadline.IsZero() && !running {
					now = maxTime(now, deadline)
					apply(e.TimerFired(now, timer))
				}
			case 3:
				if asking {
					asking = false
					apply(e.UsageLimitAnswered(now, rapid.Bool().Draw(t, "switched")))
				}
			case 4:
				now = now.Add(time.Duration(rapid.Int64Range(0, int64(10*time.Minute)).Draw(t, "elapse")))
			}
		}
	})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
