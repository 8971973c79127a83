package policy_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/policy"
)

// driver is a minimal driver in the test: it keeps history, answers what
// the engine waits for at once, and records the events and what is armed.
type driver struct {
	e       *policy.Engine
	history []policy.Entry
	events  []string
	run     policy.RunID
	timer   policy.TimerID
	at      time.Time // the armed timer's deadline
	settled bool
}

func (d *driver) feed(effects []policy.Effect) {
	var feedback []func() []policy.Effect
	for _, ef := range effects {
		switch ef.Kind {
		case policy.Emit:
			d.events = append(d.events, describe([]policy.Effect{ef})...)
		case policy.StartRun:
			d.run = ef.Run
		case policy.StartTimer:
			d.timer, d.at = ef.Timer, ef.Deadline
		case policy.StopTimer:
			d.timer = 0
		case policy.Append:
			d.history = append(d.history, ef.Entries...)
			if ef.Await {
				feedback = append(feedback, func() []policy.Effect { return d.e.Appended(d.at, nil) })
			}
		case policy.MarkUsageLimit:
			feedback = append(feedback, func() []policy.Effect { return d.e.UsageLimitAnswered(d.at, false) })
		case policy.FinishTurn:
			d.settled = true
		}
	}
	for _, f := range feedback {
		d.feed(f())
	}
}

// answerRun plays the run in flight with one call answered by m.
func (d *driver) answerRun(at time.Time, m policy.Message, draw float64) {
	run := d.run
	for _, ev := range []policy.Event{policy.AgentStart{}, policy.MessageStart{Message: m}, policy.MessageEnd{Message: m}, policy.AgentEnd{}} {
		d.feed(d.e.RunEvent(at, run, ev))
	}
	d.feed(d.e.RunReturned(at, run, policy.RunReturn{Draw: draw}))
}

// fire fires the armed timer at its deadline.
func (d *driver) fire() time.Time {
	at := d.at
	d.feed(d.e.TimerFired(at, d.timer))
	return at
}

func newDriver(t require.TestingT, cfg policy.Config) *driver {
	e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: cfg})
	require.NoError(t, err)
	return &driver{e: e}
}

// resumed is a new driver on the engine Resume makes from d's snapshot (as
// JSON, as another process would read it) and d's history.
func (d *driver) resumed(t require.TestingT, at time.Time, draw float64) *driver {
	snap := d.e.Snapshot()
	data, err := json.Marshal(snap)
	require.NoError(t, err)
	var back policy.Snapshot
	require.NoError(t, json.Unmarshal(data, &back))
	e, effects, err := policy.Resume(policy.Setup{Model: testModel, History: d.history}, back, at, draw)
	require.NoError(t, err)
	r := &driver{e: e, history: append([]policy.Entry(nil), d.history...)}
	r.feed(effects)
	return r
}

// A session snapshotted while it waits out a backoff resumes exactly: the
// same deadline, attempt and events after it as without the interruption.
func TestResumeInBackoffIsExact(t *testing.T) {
	cfg := policy.DefaultConfig()
	d := newDriver(t, cfg)
	effects, err := d.e.Prompt(t0, "hi")
	require.NoError(t, err)
	d.feed(effects)
	d.answerRun(t0, answer(classify.StopReasonError, "503"), 0)
	require.Equal(t, "backoff", string(d.e.Status().State))

	r := d.resumed(t, t0.Add(time.Second), 0)
	assert.Equal(t, d.at, r.at, "the original deadline")
	assert.Equal(t, d.e.Status(), r.e.Status())
	assert.Equal(t, d.e.Messages(), r.e.Messages())
	assert.Empty(t, r.events, "nothing happens before the deadline")

	for _, x := range []*driver{d, r} {
		x.events = nil
		at := x.fire()
		x.answerRun(at, answer(classify.StopReasonStop, "done"), 0)
	}
	assert.Equal(t, d.events, r.events)
	assert.True(t, r.settled, "the turn in flight settles in the resumed session too")
}

// A resumed wait whose deadline has passed fires at once.
func TestResumeAfterTheDeadline(t *testing.T) {
	d := newDriver(t, policy.DefaultConfig())
	effects, _ := d.e.Prompt(t0, "hi")
	d.feed(effects)
	d.answerRun(t0, answer(classify.StopReasonError, "503"), 0)
	r := d.resumed(t, t0.Add(time.Hour), 0)
	assert.True(t, !r.at.After(t0.Add(time.Hour)), "armed for a time already passed")
}

// A run in flight at the snapshot is resumed as interrupted: a transient
// failure of its attempt, so the chain's limits hold.
func TestResumeInterruptedRun(t *testing.T) {
	cfg := policy.DefaultConfig()
	cfg.Retry.MaxRetries = 1
	d := newDriver(t, cfg)
	effects, _ := d.e.Prompt(t0, "hi")
	d.feed(effects)
	d.answerRun(t0, answer(classify.StopReasonError, "503"), 0)
	d.fire() // the continuation, attempt 1 of 1, is in flight
	require.Equal(t, "continuing", string(d.e.Status().State))

	r := d.resumed(t, t0.Add(time.Minute), 0)
	assert.Equal(t, []string{
		"state continuing>classifying agent_end",
		"retry_end false 1 interrupted: the session was resumed from a snapshot",
		"state classifying>exhausted exhaust",
		"state exhausted>idle reset",
		"turn_settled false",
	}, r.events)

	// With attempts left, the interruption is retried.
	cfg.Retry.MaxRetries = 3
	d = newDriver(t, cfg)
	effects, _ = d.e.Prompt(t0, "hi")
	d.feed(effects)
	r = d.resumed(t, t0, 0)
	assert.Equal(t, []string{
		"state idle>classifying agent_end",
		"retry_start 1/3 2000ms",
		"state classifying>backoff retry",
	}, r.events)
}

func TestResumeRefusesWhatItCannotResume(t *testing.T) {
	d := newDriver(t, policy.DefaultConfig())
	effects, _ := d.e.Prompt(t0, "hi")
	d.feed(effects)
	d.answerRun(t0, answer(classify.StopReasonStop, "done"), 0)
	good := d.e.Snapshot()
	for name, c := range map[string]struct {
		mod     func(*policy.Snapshot)
		history []policy.Entry
		says    string
	}{
		"a newer version":        {func(s *policy.Snapshot) { s.Version = 2 }, d.history, "version 2"},
		"an unknown version":     {func(s *policy.Snapshot) { s.Version = 0 }, d.history, "version 0"},
		"a shorter history":      {nil, d.history[:1], "the history has 1"},
		"a history moved on":     {nil, append(d.history, d.history[0]), "moved on"},
		"an unknown state":       {func(s *policy.Snapshot) { s.State = "dancing" }, d.history, "dancing"},
		"backoff with no time":   {func(s *policy.Snapshot) { s.State = "backoff" }, d.history, "deadline"},
		"a negative attempt":     {func(s *policy.Snapshot) { s.Attempt = -1 }, d.history, "negative"},
		"invalid settings":       {func(s *policy.Snapshot) { s.Config.Retry.Jitter = 7 }, d.history, "retry.jitter"},
		"a state with no flight": {func(s *policy.Snapshot) { s.State = "continuing" }, d.history, "in flight"},
	} {
		t.Run(name, func(t *testing.T) {
			snap := good
			if c.mod != nil {
				c.mod(&snap)
			}
			_, _, err := policy.Resume(policy.Setup{Model: testModel, History: c.history}, snap, t0, 0)
			require.ErrorIs(t, err, policy.ErrSnapshot)
			assert.ErrorContains(t, err, c.says)
		})
	}
	_, _, err := policy.Resume(policy.Setup{SessionID: "other", Model: testModel, History: d.history}, good, t0, 0)
	assert.ErrorContains(t, err, "session \"s\"'s")
}

// script hands out the answers of a session's model calls in order, with
// the jitter's draw of each; once they run out, every call succeeds.
type script struct {
	answers []policy.Message
	draws   []float64
	next    int
}

func (sc *script) take() (policy.Message, float64) {
	if sc.next >= len(sc.answers) {
		return answer(classify.StopReasonStop, "done"), 0
	}
	sc.next++
	return sc.answers[sc.next-1], sc.draws[sc.next-1]
}

// drive plays turns on d, calling quiet at every quiet point (before each
// prompt, and in each backoff before its timer fires); quiet may replace
// the driver.
func drive(t *rapid.T, d *driver, sc *script, turns int, quiet func(*driver, time.Time) *driver) *driver {
	at := t0
	for turn := range turns {
		d = quiet(d, at)
		d.settled = false
		effects, err := d.e.Prompt(at, fmt.Sprint("question ", turn))
		if err != nil {
			t.Fatalf("prompt %d: %v", turn, err)
		}
		d.feed(effects)
		for steps := 0; !d.settled; steps++ {
			if steps > 100 {
				t.Fatalf("turn %d does not settle: %+v", turn, d.e.Status())
			}
			switch st := d.e.Status(); {
			case st.State == "backoff":
				d = quiet(d, at)
				at = d.fire()
			case st.Compacting:
				d.feed(d.e.CompactionFinished(at, d.e.CompactionInFlight(), policy.Summary{Text: "summary"}, nil))
			case st.Streaming:
				m, draw := sc.take()
				d.answerRun(at, m, draw)
			default:
				t.Fatalf("turn %d is stuck: %+v", turn, st)
			}
		}
	}
	return d
}

// For random sessions snapshotted at a random quiet point (idle, or waiting
// out a backoff), the resumed engine's events from there on are the
// uninterrupted engine's, and so is where it ends.
func TestResumeAtAQuietPointIsExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := policy.DefaultConfig()
		cfg.Retry.MaxRetries = rapid.IntRange(0, 4).Draw(t, "maxRetries")
		cfg.Retry.Jitter = rapid.SampledFrom([]float64{0, 0.5}).Draw(t, "jitter")
		cfg.Compaction.KeepRecentTokens = rapid.SampledFrom([]int{5, 20000}).Draw(t, "keepRecentTokens")
		kinds := []policy.Message{
			answer(classify.StopReasonStop, "done"),
			answer(classify.StopReasonError, "503 Service Unavailable"),
			answer(classify.StopReasonError, "prompt is too long"),
			answer(classify.StopReasonError, "invalid api key"),
			{Role: policy.RoleAssistant, StopReason: classify.StopReasonStop, Content: policy.TextContent("big"), Provider: "p", Model: "m", Usage: &policy.Usage{Input: 180000}},
		}
		newScript := func(n int, pick func(i int) (policy.Message, float64)) *script {
			sc := &script{}
			for i := range n {
				m, d := pick(i)
				sc.answers, sc.draws = append(sc.answers, m), append(sc.draws, d)
			}
			return sc
		}
		n := rapid.IntRange(1, 15).Draw(t, "calls")
		picks := make([]int, n)
		draws := make([]float64, n)
		for i := range n {
			picks[i] = rapid.IntRange(0, len(kinds)-1).Draw(t, fmt.Sprint("call", i))
			draws[i] = rapid.Float64Range(0, 0.99).Draw(t, fmt.Sprint("draw", i))
		}
		pick := func(i int) (policy.Message, float64) { return kinds[picks[i]], draws[i] }
		turns := rapid.IntRange(1, 5).Draw(t, "turns")
		k := rapid.IntRange(0, 5).Draw(t, "snapshot at quiet point")

		seen, mark := 0, -1
		whole := drive(t, newDriver(t, cfg), newScript(n, pick), turns, func(d *driver, _ time.Time) *driver {
			if seen == k {
				mark = len(d.events)
			}
			seen++
			return d
		})
		seen = 0
		resumed := drive(t, newDriver(t, cfg), newScript(n, pick), turns, func(d *driver, at time.Time) *driver {
			defer func() { seen++ }()
			if seen != k {
				return d
			}
			return d.resumed(t, at, 0)
		})
		if mark < 0 {
			return // fewer quiet points than k: nothing was resumed
		}
		assert.Equal(t, whole.events[mark:], resumed.events, "the events after the snapshot")
		assert.Equal(t, whole.e.Status(), resumed.e.Status())
		assert.Equal(t, whole.e.Messages(), resumed.e.Messages())
	})
}
