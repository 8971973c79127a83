package policy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
)

// driver is a minimal driver in the test: it keeps history, answers what
// the engine waits for at once, and records the events and what is armed.
type driver struct {
	e       *policy.Engine
	history []transcript.Entry
	events  []string
	run     policy.RunID
	timer   policy.TimerID
	comp    policy.CompactionID
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
		case policy.StartCompaction:
			d.comp = ef.Compaction
		case policy.CancelCompaction:
			d.comp = 0
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
func (d *driver) answerRun(at time.Time, m transcript.Message, draw float64) {
	run := d.run
	for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: m}, events.MessageEnd{Message: m}, events.AgentEnd{}} {
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

// resumed is a new driver on the engine Restore makes from d's snapshot (as
// JSON, as another process would read it) and d's history.
func (d *driver) resumed(t require.TestingT, at time.Time, draw float64) *driver {
	snap := d.e.Snapshot()
	data, err := json.Marshal(snap)
	require.NoError(t, err)
	var back policy.Snapshot
	require.NoError(t, json.Unmarshal(data, &back))
	e, effects, err := policy.Restore(policy.Setup{Model: testModel, History: d.history}, back, at, draw)
	require.NoError(t, err)
	r := &driver{e: e, history: append([]transcript.Entry(nil), d.history...)}
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
	d.answerRun(t0, answer(transcript.StopReasonError, "503"), 0)
	require.Equal(t, "backoff", string(d.e.Status().State))

	r := d.resumed(t, t0.Add(time.Second), 0)
	assert.Equal(t, d.at, r.at, "the original deadline")
	assert.Equal(t, d.e.Status(), r.e.Status())
	assert.Equal(t, d.e.Messages(), r.e.Messages())
	assert.Empty(t, r.events, "nothing happens before the deadline")

	for _, x := range []*driver{d, r} {
		x.events = nil
		at := x.fire()
		x.answerRun(at, answer(transcript.StopReasonStop, "done"), 0)
	}
	assert.Equal(t, d.events, r.events)
	assert.True(t, r.settled, "the turn in flight settles in the resumed session too")
}

// A resumed wait whose deadline has passed fires at once.
func TestResumeAfterTheDeadline(t *testing.T) {
	d := newDriver(t, policy.DefaultConfig())
	effects, _ := d.e.Prompt(t0, "hi")
	d.feed(effects)
	d.answerRun(t0, answer(transcript.StopReasonError, "503"), 0)
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
	d.answerRun(t0, answer(transcript.StopReasonError, "503"), 0)
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
	d.answerRun(t0, answer(transcript.StopReasonStop, "done"), 0)
	good := d.e.Snapshot()
	for name, c := range map[string]struct {
		mod     func(*policy.Snapshot)
		history []transcript.Entry
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
			_, _, err := policy.Restore(policy.Setup{Model: testModel, History: c.history}, snap, t0, 0)
			require.ErrorIs(t, err, policy.ErrSnapshot)
			assert.ErrorContains(t, err, c.says)
		})
	}
	_, _, err := policy.Restore(policy.Setup{SessionID: "other", Model: testModel, History: d.history}, good, t0, 0)
	assert.ErrorContains(t, err, "session \"s\"'s")
}

// script hands out the answers of a session's model calls in order, with
// the jitter's draw of each; once they run out, every call succeeds.
type script struct {
	answers []transcript.Message
	draws   []float64
	next    int
}

func (sc *script) take() (transcript.Message, float64) {
	if sc.next >= len(sc.answers) {
		return answer(transcript.StopReasonStop, "done"), 0
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
				d.feed(d.e.CompactionFinished(at, d.comp, policy.Summary{Text: "summary"}, nil))
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
		kinds := []transcript.Message{
			answer(transcript.StopReasonStop, "done"),
			answer(transcript.StopReasonError, "503 Service Unavailable"),
			answer(transcript.StopReasonError, "prompt is too long"),
			answer(transcript.StopReasonError, "invalid api key"),
			{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Content: transcript.TextContent("big"), Provider: "p", Model: "m", Usage: &transcript.Usage{Input: 180000}},
		}
		newScript := func(n int, pick func(i int) (transcript.Message, float64)) *script {
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
		pick := func(i int) (transcript.Message, float64) { return kinds[picks[i]], draws[i] }
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

// big is an answer whose usage is over the test model's compaction
// threshold.
func big() transcript.Message {
	m := answer(transcript.StopReasonStop, "a long answer, some forty characters long")
	m.Usage = &transcript.Usage{Input: 190000}
	return m
}

// checking is a driver whose session has a prompt waiting for the check
// before it: a threshold compaction of the context the last run left.
func checking(t *testing.T) *driver {
	cfg := policy.DefaultConfig()
	cfg.Compaction.KeepRecentTokens = 5
	d := newDriver(t, cfg)
	d.e.SetCompactionEnabled(false)
	for _, text := range []string{"first", "then"} {
		effects, err := d.e.Prompt(t0, text)
		require.NoError(t, err)
		d.feed(effects)
		d.answerRun(t0, big(), 0)
	}
	d.e.SetCompactionEnabled(true)
	effects, err := d.e.Prompt(t0, "second")
	require.NoError(t, err)
	require.Equal(t, []string{"compaction_start threshold", "start_compaction 3 cut=3 kept=1", "state idle>compacting check_threshold"}, describe(effects))
	d.feed(effects)
	return d
}

// A snapshot taken while a prompt waits for the check before it keeps the
// prompt: the resumed engine ends the check's compaction as interrupted,
// then sends the prompt, which history records and the turn settles on. It
// was lost: the turn settled as a success with no prompt sent.
func TestResumeSendsThePromptTheCheckHeld(t *testing.T) {
	d := checking(t)
	r := d.resumed(t, t0.Add(time.Second), 0)
	require.NotZero(t, r.run, "the prompt's run starts")
	last := r.history[len(r.history)-1]
	require.Equal(t, transcript.EntryMessage, last.Type)
	assert.Equal(t, transcript.RoleUser, last.Message.Role)
	assert.Equal(t, "second", last.Message.Text())
	assert.False(t, r.settled, "the turn waits for its run")
	r.answerRun(t0.Add(time.Second), answer(transcript.StopReasonStop, "done"), 0)
	assert.True(t, r.settled)
	assert.Equal(t, "done", r.e.Messages()[len(r.e.Messages())-1].Text())

	// Resumed twice from one snapshot, each engine sends the prompt once,
	// under the ID it had, and numbers new IDs after it.
	r2 := d.resumed(t, t0.Add(time.Second), 0)
	assert.Equal(t, last.ID, r2.history[len(r2.history)-1].ID)
	r2.answerRun(t0.Add(time.Second), answer(transcript.StopReasonStop, "done"), 0)
	msgs := r2.e.Messages()
	assert.Greater(t, idNumberOf(msgs[len(msgs)-1].ID), idNumberOf(last.ID))
}

func idNumberOf(id string) int {
	var n int
	_, _ = fmt.Sscanf(id[strings.LastIndexByte(id, '-')+1:], "%d", &n)
	return n
}

// A snapshot of the check before a prompt without its prompt (as this
// package wrote it before it carried the prompt) is refused: resumed, the
// turn would settle without the prompt ever sent.
func TestResumeRefusesACheckWithoutItsPrompt(t *testing.T) {
	d := checking(t)
	data, err := json.Marshal(d.e.Snapshot())
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(data, &raw))
	require.Contains(t, raw, "prompt")
	delete(raw, "prompt")
	data, err = json.Marshal(raw)
	require.NoError(t, err)
	var old policy.Snapshot
	require.NoError(t, json.Unmarshal(data, &old))
	_, _, err = policy.Restore(policy.Setup{Model: testModel, History: d.history}, old, t0, 0)
	require.ErrorIs(t, err, policy.ErrSnapshot)
	assert.ErrorContains(t, err, "prompt: missing")
}

// A run Abort cancelled, snapshotted before it returned, resumes as
// aborted: it decides nothing and the turn fails with ErrAborted. A user's
// run was resumed as interrupted and retried; a continuation's snapshot
// (idle, with the continuation in flight) was refused.
func TestResumeAfterAbortDecidesNothing(t *testing.T) {
	d := newDriver(t, policy.DefaultConfig())
	effects, err := d.e.Prompt(t0, "hi")
	require.NoError(t, err)
	d.feed(effects)
	d.feed(d.e.Abort(t0, policy.ErrAborted))
	r := d.resumed(t, t0, 0)
	assert.NotContains(t, strings.Join(r.events, "\n"), "retry_start")
	assert.Equal(t, []string{"turn_settled false"}, r.events)
	assert.Equal(t, "idle", string(r.e.Status().State))
	assert.Zero(t, r.timer)

	d = newDriver(t, policy.DefaultConfig())
	effects, err = d.e.Prompt(t0, "hi")
	require.NoError(t, err)
	d.feed(effects)
	d.answerRun(t0, answer(transcript.StopReasonError, "503"), 0)
	d.fire() // the continuation is in flight
	d.feed(d.e.Abort(t0, policy.ErrAborted))
	r = d.resumed(t, t0.Add(time.Minute), 0)
	assert.Equal(t, []string{"turn_settled false"}, r.events)
	assert.Equal(t, policy.Status{State: "idle", RetryEnabled: true, CompactionEnabled: true, MessageCount: len(d.e.Messages())}, r.e.Status())
}

// An append that failed is undone: the engine counts only the entries the
// history has, so its snapshot resumes on that history. The undo read what
// the input before it had appended after forgetting it, and undid nothing.
func TestFailedAppendIsUndone(t *testing.T) {
	e := newEngine(t, nil)
	_, err := e.Prompt(t0, "hi")
	require.NoError(t, err)
	e.Appended(t0, errors.New("disk full"))
	require.Equal(t, 0, e.Snapshot().History, "the prompt's entry is in no history")
	_, _, err = policy.Restore(policy.Setup{Model: testModel}, e.Snapshot(), t0, 0)
	require.NoError(t, err)
}

// Restore refuses a snapshot that breaks the engine's invariants, naming the
// field: among them a resumed idle engine with attempt 1 started its next
// chain at attempt 2, with a 4 s delay.
func TestResumeRefusesBrokenInvariants(t *testing.T) {
	d := newDriver(t, policy.DefaultConfig())
	effects, _ := d.e.Prompt(t0, "hi")
	d.feed(effects)
	d.answerRun(t0, answer(transcript.StopReasonStop, "done"), 0)
	idle := d.e.Snapshot()
	effects, _ = d.e.Prompt(t0, "again")
	d.feed(effects)
	d.answerRun(t0, answer(transcript.StopReasonError, "503"), 0)
	backoff := d.e.Snapshot()
	require.Equal(t, 1, backoff.Attempt)
	deadline := t0
	for name, c := range map[string]struct {
		snap  policy.Snapshot
		mod   func(*policy.Snapshot)
		field string
	}{
		"idle with attempt 1":          {idle, func(s *policy.Snapshot) { s.Attempt = 1 }, "attempt: 1 in state \"idle\""},
		"backoff with attempt 0":       {backoff, func(s *policy.Snapshot) { s.Attempt = 0 }, "attempt: 0 in state backoff"},
		"an attempt above maxRetries":  {backoff, func(s *policy.Snapshot) { s.Attempt = 4 }, "attempt: 4 is above retry.maxRetries 3"},
		"maxRetries below the attempt": {backoff, func(s *policy.Snapshot) { s.Config.Retry.MaxRetries = 0 }, "attempt: 1 is above retry.maxRetries 0"},
		"an invalid config":            {idle, func(s *policy.Snapshot) { s.Config.Compaction.ReserveTokens = -1 }, "config: policy: invalid settings: compaction.reserveTokens"},
		"a deadline with no backoff":   {idle, func(s *policy.Snapshot) { s.Deadline = &deadline }, "deadline: set in state \"idle\" (a deadline is a backoff's)"},
		// The error says what is wrong: the deadline is missing, not there.
		"a backoff with no deadline":     {backoff, func(s *policy.Snapshot) { s.Deadline = nil }, "deadline: missing in state \"backoff\" (a backoff waits until its deadline)"},
		"a negative history":             {idle, func(s *policy.Snapshot) { s.History = -1 }, "history: negative -1"},
		"no session":                     {idle, func(s *policy.Snapshot) { s.SessionID = "" }, "sessionId: empty"},
		"a transient state":              {idle, func(s *policy.Snapshot) { s.State = "classifying" }, "state: \"classifying\""},
		"an unknown thing in flight":     {idle, func(s *policy.Snapshot) { s.InFlight = "nap" }, "inFlight: unknown \"nap\""},
		"a continuation while idle":      {idle, func(s *policy.Snapshot) { s.InFlight = "continuation" }, "inFlight: \"continuation\" in flight in state idle"},
		"a compaction reason, none runs": {idle, func(s *policy.Snapshot) { s.Compaction = "threshold" }, "compaction: reason \"threshold\""},
		"a check with no turn":           {idle, func(s *policy.Snapshot) { s.CompactionCheck = true }, "compaction: reason \"\" (check true)"},
	} {
		t.Run(name, func(t *testing.T) {
			snap := c.snap
			c.mod(&snap)
			history := d.history
			if snap.History >= 0 && snap.History < len(history) {
				history = history[:snap.History]
			}
			_, _, err := policy.Restore(policy.Setup{Model: testModel, History: history}, snap, t0, 0)
			require.ErrorIs(t, err, policy.ErrSnapshot)
			assert.ErrorContains(t, err, c.field)
		})
	}
}

// A snapshot read from JSON must hold every field Snapshot writes: one
// without its config (or a setting of it) is refused, naming it, rather
// than read as retry and compaction off.
func TestSnapshotJSONNeedsEveryField(t *testing.T) {
	good, err := json.Marshal(newEngine(t, nil).Snapshot())
	require.NoError(t, err)
	var back policy.Snapshot
	require.NoError(t, json.Unmarshal(good, &back))
	for _, c := range []struct{ path, says string }{
		{"config", "config: missing"},
		{"config.retry", "config.retry: missing"},
		{"config.retry.maxRetries", "config.retry.maxRetries: missing"},
		{"config.compaction.enabled", "config.compaction.enabled: missing"},
		{"version", "version: missing"},
		{"state", "state: missing"},
		{"sessionId", "sessionId: missing"},
	} {
		var raw map[string]any
		require.NoError(t, json.Unmarshal(good, &raw))
		obj, keys := raw, strings.Split(c.path, ".")
		for _, k := range keys[:len(keys)-1] {
			obj = obj[k].(map[string]any)
		}
		delete(obj, keys[len(keys)-1])
		data, err := json.Marshal(raw)
		require.NoError(t, err)
		err = json.Unmarshal(data, &back)
		require.ErrorIs(t, err, policy.ErrSnapshot, c.path)
		assert.ErrorContains(t, err, c.says)
	}
	for data, says := range map[string]string{
		`null`:                     "the snapshot: not a JSON object",
		`[]`:                       "the snapshot: not a JSON object",
		`{"config": null}`:         "version: missing",
		`{"version": "1"}`:         "sessionId: missing",
		string(good[:len(good)-1]): "unexpected end",
	} {
		err := json.Unmarshal([]byte(data), &back)
		require.Error(t, err, data)
		assert.ErrorContains(t, err, says, data)
	}
	var cfgNull map[string]any
	require.NoError(t, json.Unmarshal(good, &cfgNull))
	cfgNull["config"] = nil
	data, _ := json.Marshal(cfgNull)
	assert.ErrorContains(t, json.Unmarshal(data, &back), "config: null")
}

// TestSnapshotSharesNothingWithTheEngine: a snapshot is a value. Changing
// its fallback settings (a pointer in Config) leaves the engine's as they
// were, and so does changing the Setup the engine was made from. The
// snapshot handed out the engine's own FallbackConfig: a caller that
// edited a snapshot before storing it changed the running session's
// fallback models and cooldown.
func TestSnapshotSharesNothingWithTheEngine(t *testing.T) {
	fb := &policy.FallbackConfig{Models: []policy.FallbackModel{{ID: "small"}}, CooldownMs: 60_000}
	e := newEngine(t, func(s *policy.Setup) { s.Config.Fallback = fb })
	fb.Models[0].ID, fb.CooldownMs = "changed in the setup", 1
	snap := e.Snapshot()
	require.NotNil(t, snap.Config.Fallback)
	snap.Config.Fallback.Models[0].ID = "changed in the snapshot"
	snap.Config.Fallback.CooldownMs = 2
	snap.Config.Fallback.Models = append(snap.Config.Fallback.Models, policy.FallbackModel{ID: "added"})
	again := e.Snapshot().Config.Fallback
	assert.Equal(t, &policy.FallbackConfig{Models: []policy.FallbackModel{{ID: "small"}}, CooldownMs: 60_000}, again)
}

// TestSnapshotAtItsEdges: snapshots at the edges of what Restore takes: a
// session on its own model with a fallback setting (no active model to
// write), an overflow's count at its largest (math.MaxInt32), and a turn
// whose overflow episode is marked while no compaction is in flight (a
// backoff after the recovery's continuation failed).
func TestSnapshotAtItsEdges(t *testing.T) {
	cfg := policy.DefaultConfig()
	cfg.Fallback = &policy.FallbackConfig{Models: []policy.FallbackModel{{ID: "b"}}}
	d := newDriver(t, cfg)
	effects, _ := d.e.Prompt(t0, "hi")
	d.feed(effects)
	d.answerRun(t0, answer(transcript.StopReasonStop, "done"), 0)
	snap := d.e.Snapshot()
	assert.Empty(t, snap.ActiveModel, "on its own model a session writes no active model")
	assert.Nil(t, snap.FallbackUntil)
	r := d.resumed(t, t0, 0)
	assert.Equal(t, testModel.ID, r.e.Status().ActiveModel)

	largest := snap
	largest.OverflowTokens, largest.OverflowCounted = math.MaxInt32, true
	e, _, err := policy.Restore(policy.Setup{Model: testModel, History: d.history}, largest, t0, 0)
	require.NoError(t, err, "an overflow's count of math.MaxInt32 is one an engine keeps")
	assert.Equal(t, math.MaxInt32, e.Snapshot().OverflowTokens)
	largest.OverflowTokens++
	_, _, err = policy.Restore(policy.Setup{Model: testModel, History: d.history}, largest, t0, 0)
	require.ErrorIs(t, err, policy.ErrSnapshot)
	assert.ErrorContains(t, err, "overflowTokens")

	effects, _ = d.e.Prompt(t0, "again")
	d.feed(effects)
	d.answerRun(t0, answer(transcript.StopReasonError, "503"), 0)
	episode := d.e.Snapshot()
	require.Equal(t, states.Backoff, episode.State)
	require.Empty(t, episode.InFlight)
	episode.EpisodeCompacted = true
	e, _, err = policy.Restore(policy.Setup{Model: testModel, History: d.history}, episode, t0, 0)
	require.NoError(t, err, "a turn's marked episode outlives the compaction that marked it")
	assert.True(t, e.Snapshot().EpisodeCompacted)
}
