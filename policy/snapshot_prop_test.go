package policy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// walker drives an engine as a driver would, but lets every answer the
// engine waits for (a run's events and end, the timer, the summary, the
// credential store, an awaited append) come whenever its caller chooses,
// so that a snapshot can be taken between any two inputs.
type walker struct {
	e       *policy.Engine
	history []transcript.Entry
	at      time.Time

	run       policy.RunID // the run in flight, 0 for none
	runPrompt string       // its prompt's text, "" for a continuation
	timer     policy.TimerID
	deadline  time.Time
	comp      policy.CompactionID
	manual    bool // the compaction in flight is Compact's
	usage     bool // MarkUsageLimit waits for its answer
	await     bool // an Append waits for Appended
	finished  int  // FinishTurn effects seen
	failAppnd bool // the next Append that awaits nothing fails
	failures  int  // Appends that failed
	noFail    bool // no Append fails
	prompts   []string

	// seen, when set, is told of every input's effects as they come;
	// released, when set, runs once apply has carried effects out (and
	// fed back what they asked), where a driver calls Release.
	seen     func([]policy.Effect)
	released func()
}

func newWalker(e *policy.Engine, history []transcript.Entry, at time.Time) *walker {
	return &walker{e: e, history: append([]transcript.Entry(nil), history...), at: at}
}

// apply carries out effects, then feeds back a failed append's report,
// which the engine takes only at once.
func (w *walker) apply(effects []policy.Effect) error {
	if w.seen != nil {
		w.seen(effects)
	}
	if w.released != nil {
		defer w.released()
	}
	failed := false
	for _, ef := range effects {
		switch ef.Kind {
		case policy.StartRun:
			w.run, w.runPrompt = ef.Run, ""
			if ef.Prompt != nil {
				w.runPrompt = ef.Prompt.Text()
				w.prompts = append(w.prompts, w.runPrompt)
			}
		case policy.StartTimer:
			w.timer, w.deadline = ef.Timer, ef.Deadline
		case policy.StopTimer:
			w.timer = 0
		case policy.StartCompaction:
			w.comp = ef.Compaction
		case policy.CancelCompaction:
			if w.comp == ef.Compaction {
				w.comp = 0
			}
		case policy.Append:
			if !ef.Await && w.failAppnd {
				w.failAppnd, failed = false, true
				continue
			}
			w.history = append(w.history, ef.Entries...)
			if ef.Await {
				w.await = true
			}
		case policy.MarkUsageLimit:
			w.usage = true
		case policy.FinishTurn:
			w.finished++
		case policy.FinishCompact:
			w.manual, w.comp = false, 0
		}
	}
	if failed {
		w.failures++
		return w.apply(w.e.Appended(w.at, errors.New("disk full")))
	}
	return nil
}

// the answers a run may end with.
var walkAnswers = []transcript.Message{
	answer(transcript.StopReasonStop, "done"),
	answer(transcript.StopReasonError, "503 Service Unavailable"),
	answer(transcript.StopReasonError, "prompt is too long"),
	answer(transcript.StopReasonError, "invalid api key"),
	answer(transcript.StopReasonError, "429 usage limit reached for this billing period"),
	answer(transcript.StopReasonAborted, ""),
	{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Content: transcript.TextContent("big"), Provider: "p", Model: "m", Usage: &transcript.Usage{Input: 190000}},
	// A usage limit and a rate limit whose resets are known: waited for
	// with retry.waitForReset.
	answer(transcript.StopReasonError, "usage limit reached, retry-after: 7200"),
	answer(transcript.StopReasonError, "429 Too Many Requests: rate limit exceeded, retry-after: 90"),
}

// step takes one input, chosen by pick among those that apply now.
// pick(n) returns a number in [0, n).
func (w *walker) step(pick func(n int) int) error {
	w.at = w.at.Add(time.Duration(pick(4)) * time.Second)
	var inputs []func() error
	if w.run != 0 {
		run := w.run
		inputs = append(inputs, func() error { // one call and the end
			m := walkAnswers[pick(len(walkAnswers))]
			for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: m}, events.MessageEnd{Message: m}, events.AgentEnd{}} {
				if err := w.apply(w.e.RunEvent(w.at, run, ev)); err != nil {
					return err
				}
			}
			w.run = 0
			return w.apply(w.e.RunReturned(w.at, run, policy.RunReturn{Draw: float64(pick(10)) / 10}))
		}, func() error { // the run could not start, or failed midway
			w.run = 0
			if pick(2) == 0 {
				_ = w.apply(w.e.RunEvent(w.at, run, events.AgentStart{}))
			}
			return w.apply(w.e.RunReturned(w.at, run, policy.RunReturn{Err: errors.New("connection reset")}))
		})
	}
	if w.timer != 0 {
		inputs = append(inputs, func() error {
			w.at = later(w.at, w.deadline)
			id := w.timer
			w.timer = 0
			return w.apply(w.e.TimerFired(w.at, id))
		})
	}
	if w.comp != 0 && !w.await {
		inputs = append(inputs, func() error {
			id := w.comp
			var err error
			if pick(3) == 0 {
				err = errors.New("summarizer down")
			}
			w.comp = 0
			if err == nil && w.e.Status().Compacting { // id: the one in flight, as w tracks it
				w.comp = id // its entry is being appended
			}
			if err := w.apply(w.e.CompactionFinished(w.at, id, policy.Summary{Text: "summary"}, err)); err != nil {
				return err
			}
			if !w.await {
				w.comp = 0
			}
			return nil
		})
	}
	if w.usage {
		inputs = append(inputs, func() error {
			w.usage = false
			return w.apply(w.e.UsageLimitAnswered(w.at, pick(2) == 0))
		})
	}
	if w.await {
		inputs = append(inputs, func() error {
			w.await, w.comp = false, 0
			return w.apply(w.e.Appended(w.at, nil))
		})
	}
	inputs = append(inputs,
		func() error {
			w.failAppnd = pick(8) == 0 && !w.noFail
			effects, err := w.e.Prompt(w.at, fmt.Sprint("question ", len(w.prompts)))
			if err != nil && !errors.Is(err, policy.ErrBusy) {
				return err
			}
			return w.apply(effects)
		},
		func() error { return w.apply(w.e.Abort(w.at, policy.ErrAborted)) },
		func() error { return w.apply(w.e.AbortRetry(w.at)) },
		func() error { return w.apply(w.e.AbortCompaction(w.at)) },
		func() error {
			effects, err := w.e.Compact(w.at, "")
			if err == nil {
				w.manual = true
			}
			return w.apply(effects)
		},
		func() error { w.e.SetRetryEnabled(pick(4) != 0); return nil },
		func() error { w.e.SetCompactionEnabled(pick(4) != 0); return nil },
	)
	return inputs[pick(len(inputs))]()
}

// settle answers whatever the engine waits for, every run with a success,
// until it is at rest, then checks that it takes a prompt and settles it
// with the prompt sent: the engine works.
func (w *walker) settle() error {
	ok := func(n int) int { return 0 }
	rest := func() bool {
		st := w.e.Status()
		return !st.Streaming && !st.Compacting && st.State == "idle" && w.timer == 0 && !w.await && !w.usage
	}
	for steps := 0; !rest(); steps++ {
		if steps > 200 {
			return fmt.Errorf("the engine never comes to rest: %+v", w.e.Status())
		}
		switch {
		case w.await:
			w.await, w.comp = false, 0
			if err := w.apply(w.e.Appended(w.at, nil)); err != nil {
				return err
			}
		case w.usage:
			w.usage = false
			if err := w.apply(w.e.UsageLimitAnswered(w.at, false)); err != nil {
				return err
			}
		case w.run != 0, w.timer != 0, w.comp != 0:
			w.failAppnd = false
			// The first input step offers is the run's success, the
			// timer, or the summary.
			if err := w.step(ok); err != nil {
				return err
			}
		default:
			return fmt.Errorf("the engine waits for nothing the driver owes it, and is not at rest: %+v", w.e.Status())
		}
	}
	before, sent := w.finished, len(w.prompts)
	effects, err := w.e.Prompt(w.at, "are you there")
	if err != nil {
		return fmt.Errorf("a prompt at rest: %w", err)
	}
	if err := w.apply(effects); err != nil {
		return err
	}
	for steps := 0; w.finished == before; steps++ {
		if steps > 200 {
			return fmt.Errorf("the turn never settles: %+v", w.e.Status())
		}
		if w.run == 0 && w.timer == 0 && w.comp == 0 && !w.await && !w.usage {
			return fmt.Errorf("the turn waits for nothing and does not settle: %+v", w.e.Status())
		}
		if err := w.step(ok); err != nil {
			return err
		}
	}
	if len(w.prompts) != sent+1 || w.prompts[sent] != "are you there" {
		return fmt.Errorf("the turn settled without sending its prompt (sent %q)", w.prompts[sent:])
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// roundTrip passes snap through JSON, as another process reads it.
func roundTrip(snap policy.Snapshot) (policy.Snapshot, error) {
	data, err := json.Marshal(snap)
	if err != nil {
		return policy.Snapshot{}, err
	}
	var back policy.Snapshot
	return back, json.Unmarshal(data, &back)
}

// breakers are mutations of one field of a snapshot, each breaking an
// invariant of the engine when it applies (ok), with the field the refusal
// must name.
var breakers = []struct {
	name, field string
	mod         func(s *policy.Snapshot) bool
}{
	{"idle with an attempt", "attempt", func(s *policy.Snapshot) bool {
		s.Attempt = 1
		return s.State == "idle" && s.Config.Retry.MaxRetries > 0
	}},
	{"compacting with an attempt", "attempt", func(s *policy.Snapshot) bool {
		s.Attempt = 1
		return s.State == "compacting" && s.Config.Retry.MaxRetries > 0
	}},
	{"backoff with attempt 0", "attempt", func(s *policy.Snapshot) bool { s.Attempt = 0; return s.State == "backoff" }},
	{"an attempt above maxRetries", "attempt", func(s *policy.Snapshot) bool {
		s.Attempt = s.Config.Retry.MaxRetries + 1
		return s.Config.Retry.MaxRetries >= 0 // -1: no count limit
	}},
	{"a negative attempt", "attempt", func(s *policy.Snapshot) bool { s.Attempt = -1; return true }},
	{"fewer retries than the attempt", "attempt", func(s *policy.Snapshot) bool {
		s.Config.Retry.MaxRetries = s.Attempt - 1
		return s.Attempt > 0
	}},
	{"an invalid config", "config", func(s *policy.Snapshot) bool { s.Config.Retry.Jitter = 2; return true }},
	{"a deadline without a backoff", "deadline", func(s *policy.Snapshot) bool {
		d := t0
		s.Deadline = &d
		return s.State != "backoff"
	}},
	{"a backoff without its deadline", "deadline", func(s *policy.Snapshot) bool { s.Deadline = nil; return s.State == "backoff" }},
	{"tickets with no room left", "tickets", func(s *policy.Snapshot) bool { s.Tickets = 1 << 62; return true }},
	{"a state a snapshot is never in", "state", func(s *policy.Snapshot) bool { s.State = "classifying"; return true }},
	{"an unknown thing in flight", "inFlight", func(s *policy.Snapshot) bool { s.InFlight = "dance"; return true }},
	{"nothing in flight while continuing", "inFlight", func(s *policy.Snapshot) bool {
		s.InFlight = ""
		return s.State == "continuing"
	}},
	{"a negative history", "history", func(s *policy.Snapshot) bool { s.History = -1; return true }},
	{"a newer version", "version", func(s *policy.Snapshot) bool { s.Version = 2; return true }},
	{"no session", "sessionId", func(s *policy.Snapshot) bool { s.SessionID = ""; return true }},
	{"a check without its prompt", "prompt", func(s *policy.Snapshot) bool {
		s.Prompt = nil
		return s.CompactionCheck && !s.Aborted
	}},
	{"a prompt with no check", "prompt", func(s *policy.Snapshot) bool {
		ok := s.Prompt == nil && !s.CompactionCheck
		s.Prompt = &transcript.Message{ID: "user-999", Role: transcript.RoleUser, Content: transcript.TextContent("x")}
		return ok
	}},
	{"a prompt that is not the user's", "prompt", func(s *policy.Snapshot) bool {
		if s.Prompt == nil {
			return false
		}
		p := *s.Prompt
		p.Role = transcript.RoleAssistant
		s.Prompt = &p
		return true
	}},
	{"a compaction reason with none in flight", "compaction", func(s *policy.Snapshot) bool {
		s.Compaction = transcript.ReasonThreshold
		return s.InFlight != "compaction"
	}},
	{"a manual compaction's reason", "compaction", func(s *policy.Snapshot) bool {
		s.Compaction = transcript.ReasonManual
		return s.InFlight == "compaction"
	}},
	{"aborted with nothing in flight", "aborted", func(s *policy.Snapshot) bool { s.Aborted = true; return s.InFlight == "" }},
	{"aborted in backoff or continuing", "aborted", func(s *policy.Snapshot) bool {
		s.Aborted = true
		return s.State == "backoff" || s.State == "continuing"
	}},
}

// refusedFor reports whether err is a refusal that names field.
func refusedFor(err error, field string) bool {
	return errors.Is(err, policy.ErrSnapshot) && strings.Contains(err.Error(), ": "+field)
}

// Every snapshot the engine takes, at any point of any run of random
// inputs (a backoff, a compaction, the check before a prompt, a credential
// store's answer owed, an awaited append, after Abort), resumes, through
// JSON, on the history written so far, into an engine that works; and every
// mutation of one of its fields that breaks an invariant is refused, naming
// that field. The walk goes on, at random, on the resumed engine: a resumed
// engine's snapshots resume too.
func TestEverySnapshotResumes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := policy.DefaultConfig()
		cfg.Retry.MaxRetries = rapid.IntRange(0, 3).Draw(t, "maxRetries")
		cfg.Retry.MaxElapsedMs = rapid.SampledFrom([]int64{0, 20_000}).Draw(t, "maxElapsedMs")
		if cfg.Retry.MaxElapsedMs > 0 && rapid.Bool().Draw(t, "noCountLimit") {
			cfg.Retry.MaxRetries = -1
		}
		cfg.Retry.WaitForReset = rapid.Bool().Draw(t, "waitForReset")
		cfg.Compaction.KeepRecentTokens = rapid.SampledFrom([]int{5, 20000}).Draw(t, "keepRecentTokens")
		creds := rapid.Bool().Draw(t, "credentials")
		e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: cfg, Credentials: creds})
		if err != nil {
			t.Fatal(err)
		}
		w := newWalker(e, nil, t0)
		n := 0
		pick := func(k int) int {
			n++
			return rapid.IntRange(0, k-1).Draw(t, fmt.Sprint("pick", n))
		}
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for i := range steps {
			// The clock may jump, either way, between any two inputs.
			w.at = w.at.Add(rapid.SampledFrom([]time.Duration{0, 0, 0, -2 * time.Hour, -time.Second, time.Hour, 6 * time.Hour}).Draw(t, fmt.Sprint("jump", i)))
			if err := w.step(pick); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if !rapid.Bool().Draw(t, fmt.Sprint("snapshot", i)) {
				continue
			}
			snap, err := roundTrip(w.e.Snapshot())
			if err != nil {
				t.Fatalf("step %d: the snapshot does not read back: %v", i, err)
			}
			resume := func(s policy.Snapshot) (*walker, error) {
				r, effects, err := policy.Restore(policy.Setup{Model: testModel, History: w.history, Credentials: creds}, s, w.at, 0.5)
				if err != nil {
					return nil, err
				}
				rw := newWalker(r, w.history, w.at)
				return rw, rw.apply(effects)
			}
			r, err := resume(snap)
			if err != nil {
				t.Fatalf("step %d: the engine's own snapshot %+v is refused: %v", i, snap, err)
			}
			// A restored wait keeps its absolute deadline (a reset its
			// instant), its chain the start of its budget. (A snapshot
			// with a run in flight resumes deciding on it anew.)
			again := r.e.Snapshot()
			waiting := snap.State == "backoff"
			if waiting && snap.Deadline != nil {
				if r.timer == 0 || !r.deadline.Equal(*snap.Deadline) || again.Deadline == nil || !again.Deadline.Equal(*snap.Deadline) {
					t.Fatalf("step %d: the wait until %v resumes until %v (timer %d)", i, *snap.Deadline, r.deadline, r.timer)
				}
				if snap.ResetWait && !r.e.Status().ResetAt.Equal(*snap.Deadline) {
					t.Fatalf("step %d: the wait for the reset at %v resumes reporting %v", i, *snap.Deadline, r.e.Status().ResetAt)
				}
			}
			if waiting && snap.ChainStart != nil && (again.ChainStart == nil || !again.ChainStart.Equal(*snap.ChainStart)) {
				t.Fatalf("step %d: the chain started at %v resumes started at %v", i, *snap.ChainStart, again.ChainStart)
			}
			if err := r.settle(); err != nil {
				t.Fatalf("step %d: resumed from %+v: %v", i, snap, err)
			}
			for _, b := range breakers {
				bad := snap
				if !b.mod(&bad) {
					continue
				}
				if _, err := resume(bad); !refusedFor(err, b.field) {
					t.Fatalf("step %d: %s (%+v) is not refused naming %s: %v", i, b.name, bad, b.field, err)
				}
			}
			if rapid.Bool().Draw(t, fmt.Sprint("go on resumed", i)) {
				if w, err = resume(snap); err != nil {
					t.Fatalf("step %d: a second resume from one snapshot: %v", i, err)
				}
			}
		}
	})
}
