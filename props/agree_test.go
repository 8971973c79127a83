package props_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

// syncDriver runs a bare policy.Engine on one goroutine, with no timer: it
// calls the agent and the summarizer in place and fires each backoff at its
// deadline. It is the simplest driver there is, and TestDriversAgree checks
// that the Session, the in-process driver, makes the same decisions.
type syncDriver struct {
	e       *policy.Engine
	agent   session.Agent
	history history.MemoryHistory
	random  func() float64
	now     time.Time
	events  []string

	timer    policy.TimerID
	deadline time.Time
	armed    bool
	runs     []policy.Effect // runs and compactions to carry out
	settled  bool
}

func (d *syncDriver) feed(effects []policy.Effect) {
	var feedback []func() []policy.Effect
	for _, ef := range effects {
		switch ef.Kind {
		case policy.Emit:
			if line := line(ef.Event); line != "" {
				d.events = append(d.events, line)
			}
		case policy.StartRun, policy.StartCompaction:
			d.runs = append(d.runs, ef)
		case policy.StartTimer:
			d.timer, d.deadline, d.armed = ef.Timer, ef.Deadline, true
		case policy.StopTimer:
			d.armed = false
		case policy.Append:
			_ = d.history.Append(ef.Entries...)
			if ef.Await {
				feedback = append(feedback, func() []policy.Effect { return d.e.Appended(d.now, nil) })
			}
		case policy.FinishTurn:
			d.settled = true
		}
	}
	for _, f := range feedback {
		d.feed(f())
	}
}

// prompt plays a whole turn.
func (d *syncDriver) prompt(t *rapid.T, text string) {
	effects, err := d.e.Prompt(d.now, text)
	if err != nil {
		t.Fatalf("the bare engine refused a prompt: %v", err)
	}
	d.settled = false
	d.feed(effects)
	for steps := 0; !d.settled; steps++ {
		if steps > 1000 {
			t.Fatalf("the bare engine's turn does not settle: %+v", d.e.Status())
		}
		if len(d.runs) > 0 {
			ef := d.runs[0]
			d.runs = d.runs[1:]
			d.carryOut(ef)
			continue
		}
		if !d.armed {
			t.Fatalf("the bare engine is stuck: %+v", d.e.Status())
		}
		d.armed = false
		if d.deadline.After(d.now) {
			d.now = d.deadline
		}
		d.feed(d.e.TimerFired(d.now, d.timer))
	}
}

// carryOut runs the agent or the summarizer in place.
func (d *syncDriver) carryOut(ef policy.Effect) {
	ctx := context.Background()
	if ef.Kind == policy.StartCompaction {
		sum, err := policy.DigestSummarizer{}.Summarize(ctx, *ef.Request)
		d.feed(d.e.CompactionFinished(d.now, ef.Compaction, sum, err))
		return
	}
	var evs []events.Event
	req := session.RunRequest{SessionID: d.e.SessionID(), Prompt: ef.Prompt, Context: ef.Context, Model: d.e.Model()}
	err := d.agent.Run(ctx, req, func(ev events.Event) { evs = append(evs, ev) })
	for _, ev := range evs {
		d.feed(d.e.RunEvent(d.now, ef.Run, ev))
	}
	d.feed(d.e.RunReturned(d.now, ef.Run, policy.RunReturn{Err: err, Draw: d.random()}))
}

// line describes the events both drivers must agree on: the recovery
// events, every state change, each turn's end, and what each message was.
func line(ev events.Event) string {
	switch e := ev.(type) {
	case events.MessageEnd:
		return fmt.Sprintf("message %s %s %q", e.Message.Role, e.Message.StopReason, e.Message.ErrorMessage)
	case events.StateChange:
		return fmt.Sprintf("%s>%s %s", e.From, e.To, e.Trigger)
	case events.AutoRetryStart:
		return fmt.Sprintf("retry_start %d/%d %dms", e.Attempt, e.MaxAttempts, e.DelayMs)
	case events.AutoRetryEnd:
		return fmt.Sprintf("retry_end %v %d %q", e.Success, e.Attempt, e.FinalError)
	case events.AutoCompactionStart:
		return "compaction_start " + string(e.Reason)
	case events.AutoCompactionEnd:
		return fmt.Sprintf("compaction_end %v %v %v %q", e.Result != nil, e.Aborted, e.WillRetry, e.ErrorMessage)
	case events.TurnSettled:
		return fmt.Sprintf("turn_settled %v %v", e.Err == nil, e.Err)
	}
	return ""
}

// TestDriversAgree plays random turns on a Session (goroutines, a timer,
// fake time) and on a bare engine run by syncDriver (one goroutine, no
// timer) with the same script, settings and random draws, and checks that
// they emit the same decisions, end in the same state and hold the same
// runtime context and history.
func TestDriversAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := policy.DefaultConfig()
		cfg.Retry.MaxRetries = rapid.IntRange(0, 4).Draw(t, "maxRetries")
		cfg.Retry.BaseDelayMs = rapid.Int64Range(1, 5000).Draw(t, "baseDelayMs")
		cfg.Retry.MaxDelayMs = rapid.SampledFrom([]int64{0, 3000}).Draw(t, "maxDelayMs")
		cfg.Retry.Jitter = rapid.SampledFrom([]float64{0, 0.5}).Draw(t, "jitter")
		cfg.Retry.HonorRetryAfter = rapid.Bool().Draw(t, "honorRetryAfter")
		cfg.Compaction.KeepRecentTokens = rapid.SampledFrom([]int{5, 20000}).Draw(t, "keepRecentTokens")
		seed := rapid.Uint64().Draw(t, "seed")
		var turns [][]scripted.Call
		var toggles [][2]bool
		for i := range rapid.IntRange(1, 5).Draw(t, "turns") {
			calls := drawCalls(t)
			for j := range calls {
				calls[j].LatencyMs = 0 // the bare driver runs the agent in place
			}
			turns = append(turns, calls)
			toggles = append(toggles, [2]bool{rapid.Bool().Draw(t, fmt.Sprint("retry", i)), rapid.Bool().Draw(t, fmt.Sprint("compaction", i))})
		}
		model := scripted.DefaultModel

		// The Session, in fake time.
		var live []string
		var liveStatus policy.Status
		var liveMessages []transcript.Message
		var liveHistory []transcript.Entry
		rapid.SyncTest(t, func(t *rapid.T) {
			agent := scripted.New(scripted.Script{Model: model})
			rng := rand.New(rand.NewPCG(seed, seed))
			s, err := session.New(agent, session.WithConfig(cfg), session.WithModel(model), session.WithSessionID("agree"),
				session.WithRandom(rng.Float64))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			var mu sync.Mutex
			s.Subscribe(func(ev events.Event) {
				if l := line(ev); l != "" {
					mu.Lock()
					live = append(live, l)
					mu.Unlock()
				}
			})
			for i, calls := range turns {
				s.SetAutoRetryEnabled(toggles[i][0] || i == 0)
				s.SetAutoCompactionEnabled(toggles[i][1] || i == 0)
				agent.Append(calls...)
				_ = s.Prompt(context.Background(), fmt.Sprint("question ", i))
			}
			s.Flush()
			liveStatus, liveMessages = s.Status(), s.Messages()
			for e := range s.History().Entries() {
				liveHistory = append(liveHistory, e)
			}
			_ = s.Close()
		})

		// The bare engine.
		rng := rand.New(rand.NewPCG(seed, seed))
		e, err := policy.New(policy.Setup{SessionID: "agree", Model: model, Config: cfg})
		if err != nil {
			t.Fatalf("policy.New: %v", err)
		}
		agent := scripted.New(scripted.Script{Model: model})
		d := &syncDriver{e: e, agent: agent, random: rng.Float64, now: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}
		for i, calls := range turns {
			e.SetRetryEnabled(toggles[i][0] || i == 0)
			e.SetCompactionEnabled(toggles[i][1] || i == 0)
			agent.Append(calls...)
			d.prompt(t, fmt.Sprint("question ", i))
		}

		if fmt.Sprint(live) != fmt.Sprint(d.events) {
			t.Fatalf("the drivers disagree:\nSession: %q\nbare:    %q", live, d.events)
		}
		if liveStatus != e.Status() {
			t.Fatalf("status: Session %+v, bare %+v", liveStatus, e.Status())
		}
		if got := e.Messages(); len(got) != len(liveMessages) {
			t.Fatalf("runtime context: Session %d messages, bare %d", len(liveMessages), len(got))
		}
		bare := 0
		for range d.history.Entries() {
			bare++
		}
		if bare != len(liveHistory) {
			t.Fatalf("history: Session %d entries, bare %d", len(liveHistory), bare)
		}
	})
}
