package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/term"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/cmd/agentfsm/view"
	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

// demoBaseDelayMs is the demo's first retry delay: shorter than the
// library's 2000 ms so a run of every scenario takes seconds.
const demoBaseDelayMs = 1000

// scenario is one story the demo plays.
type scenario struct {
	name  string
	about string
	// prompts are sent one after the other; calls answer their model calls.
	prompts []string
	calls   []scripted.Call
	creds   []policy.Credential
	// autoCancel: when stdin is not a terminal, a user pressing Esc
	// halfway through the first retry wait is played.
	autoCancel bool
	keepRecent int
}

// scenarios returns the demo's stories; each model call takes a quarter of
// the base delay, so the whole demo scales with --base-delay-ms.
func scenarios(baseDelayMs int64) []scenario {
	latency := baseDelayMs / 4
	errCall := func(text string) scripted.Call {
		return scripted.Call{StopReason: "error", ErrorMessage: text, LatencyMs: latency}
	}
	okCall := func(text string) scripted.Call {
		return scripted.Call{StopReason: "stop", Text: text, LatencyMs: latency}
	}
	return []scenario{
		{
			name: "transient", about: "two transient errors, then success",
			prompts: []string{"summarize the repository"},
			calls:   []scripted.Call{errCall("503 Service Unavailable"), errCall("overloaded_error: Overloaded"), okCall("Here is the summary.")},
		},
		{
			name: "exhausted", about: "the provider keeps failing: the retries run out",
			prompts: []string{"summarize the repository"},
			calls: []scripted.Call{errCall("503 Service Unavailable"), errCall("503 Service Unavailable"),
				errCall("502 Bad Gateway"), errCall("503 Service Unavailable")},
		},
		{
			name: "usage-limit", about: "a usage limit with a free second credential: switch at once, no wait",
			prompts: []string{"summarize the repository"},
			calls:   []scripted.Call{errCall("429 usage limit reached for this key; retry-after: 3600"), okCall("Done with the second key.")},
			creds: []policy.Credential{
				{ID: "key-a", Provider: "scripted", Type: "api_key"},
				{ID: "key-b", Provider: "scripted", Type: "api_key"},
			},
		},
		{
			name: "overflow", about: "the context overflows: compact it and continue",
			prompts: []string{
				"read the design notes and list the open questions, with the section each comes from",
				"now draft answers to every question",
			},
			calls: []scripted.Call{okCall("Seven open questions, by section."),
				errCall("prompt is too long: 213462 tokens > 200000 maximum"), okCall("Here are the drafts.")},
			keepRecent: 10,
		},
		{
			name: "cancelled", about: "a retry cancelled during its wait (Esc)",
			prompts:    []string{"summarize the repository"},
			calls:      []scripted.Call{errCall("529 Overloaded"), okCall("never sent")},
			autoCancel: true,
		},
	}
}

func runDemo(args []string, env *environment) int {
	fs := newFlagSet("demo", "agentfsm demo [--scenario NAME] [--list] [--base-delay-ms N]")
	name := fs.String("scenario", "", "play only the scenario `name` (see --list)")
	list := fs.Bool("list", false, "list the scenarios and exit")
	baseDelay := fs.Int64("base-delay-ms", demoBaseDelayMs, "the first retry delay in `ms` (the library's default is 2000)")
	if code := fs.parse(args, env); code >= 0 {
		return code
	}
	if *baseDelay < 0 {
		fmt.Fprintf(env.stderr, "agentfsm demo: --base-delay-ms must not be negative, got %d\n", *baseDelay)
		return 2
	}
	all := scenarios(*baseDelay)
	if *list {
		for _, sc := range all {
			fmt.Fprintf(env.stdout, "%-12s %s\n", sc.name, sc.about)
		}
		return 0
	}
	play := all
	if *name != "" {
		play = nil
		for _, sc := range all {
			if sc.name == *name {
				play = []scenario{sc}
			}
		}
		if play == nil {
			fmt.Fprintf(env.stderr, "agentfsm demo: unknown --scenario %q (run agentfsm demo --list)\n", *name)
			return 2
		}
	}
	d := &demo{baseDelay: *baseDelay, scenarios: play}
	if interactive(env) {
		return d.runTUI(env)
	}
	return d.runPlain(env)
}

// interactive reports whether both ends of the demo are a terminal.
func interactive(env *environment) bool {
	return isTerminal(env.stdin) && isTerminal(env.stdout)
}

// isTerminal reports whether v is a file open on a terminal. Other
// character devices, such as /dev/null under cron or nohup, are not
// terminals.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	conn, err := f.SyscallConn()
	if err != nil {
		return false
	}
	// Control, not f.Fd, which would switch the file to blocking mode.
	tty := false
	if err := conn.Control(func(fd uintptr) { tty = term.IsTerminal(fd) }); err != nil {
		return false
	}
	return tty
}

// demo plays scenarios; the current session is what Esc acts on.
type demo struct {
	baseDelay int64
	scenarios []scenario

	mu      sync.Mutex
	current *session.Session
	quit    bool
}

// outcome is how one scenario ended.
type outcome struct {
	err         error
	retries     int
	compactions int
}

func (o outcome) String() string {
	var parts []string
	switch {
	case o.err == nil:
		parts = append(parts, "succeeded")
	case errors.Is(o.err, policy.ErrRetryCancelled):
		parts = append(parts, "retry cancelled")
	default:
		parts = append(parts, "failed: "+o.err.Error())
	}
	parts = append(parts, fmt.Sprintf("%d retries", o.retries))
	if o.compactions > 0 {
		parts = append(parts, fmt.Sprintf("%d compaction(s)", o.compactions))
	}
	return strings.Join(parts, ", ")
}

// play runs one scenario; emit receives each event as it happens.
func (d *demo) play(sc scenario, emit func(events.Event)) outcome {
	cfg := policy.DefaultConfig()
	cfg.Retry.BaseDelayMs = d.baseDelay
	cfg.Retry.Rules = classify.Extended
	if sc.keepRecent > 0 {
		cfg.Compaction.KeepRecentTokens = sc.keepRecent
	}
	opts := []session.Option{session.WithConfig(cfg), session.WithModel(scripted.DefaultModel), session.WithSessionID("demo-" + sc.name)}
	if len(sc.creds) > 0 {
		store, err := credentials.NewMemoryCredentials(nil, sc.creds...)
		if err != nil {
			return outcome{err: err}
		}
		opts = append(opts, session.WithCredentials(store))
	}
	s, err := session.New(scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: sc.calls}), opts...)
	if err != nil {
		return outcome{err: err}
	}
	defer s.Close()
	d.mu.Lock()
	d.current = s
	quit := d.quit
	d.mu.Unlock()
	defer func() { d.mu.Lock(); d.current = nil; d.mu.Unlock() }()
	if quit {
		return outcome{err: policy.ErrAborted}
	}
	var out outcome
	s.Subscribe(func(ev events.Event) {
		switch e := ev.(type) {
		case events.AutoRetryStart:
			out.retries = e.Attempt
		case events.AutoCompactionEnd:
			if e.Result != nil {
				out.compactions++
			}
		}
		emit(ev)
	})
	for _, p := range sc.prompts {
		if out.err = s.Prompt(context.Background(), p); out.err != nil {
			break
		}
	}
	s.Flush()
	return out
}

// session returns the session being played, nil between scenarios.
func (d *demo) session() *session.Session {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.current
}

// act does what Esc does on s (nothing when s is nil or closed).
func act(s *session.Session, esc view.Esc) {
	if s == nil {
		return
	}
	switch esc {
	case view.EscAbortRetry:
		s.AbortRetry()
	case view.EscAbortCompaction:
		s.AbortCompaction()
	case view.EscAbort:
		s.Abort()
	}
}

// describe is an event's line in the demo's log, "" for the ones it skips.
func describe(ev events.Event) string {
	switch e := ev.(type) {
	case events.StateChange:
		return fmt.Sprintf("  state  %s → %s (%s)", e.From, e.To, e.Trigger)
	case events.MessageEnd:
		m := e.Message
		switch {
		case m.Role == transcript.RoleToolResult:
			return "  tool   " + m.Text()
		case m.Role != transcript.RoleAssistant:
			return ""
		case m.StopReason == "error":
			return "  model  ✗ " + m.ErrorMessage
		case m.StopReason == "aborted":
			return "  model  aborted"
		default:
			return "  model  ✓ " + m.Text()
		}
	case events.AutoRetryStart:
		return fmt.Sprintf("  event  auto_retry_start attempt %d/%d, delay %d ms", e.Attempt, e.MaxAttempts, e.DelayMs)
	case events.AutoRetryEnd:
		if e.Success {
			return fmt.Sprintf("  event  auto_retry_end success after attempt %d", e.Attempt)
		}
		return fmt.Sprintf("  event  auto_retry_end failed at attempt %d: %s", e.Attempt, e.FinalError)
	case events.AutoCompactionStart:
		return "  event  auto_compaction_start (" + string(e.Reason) + ")"
	case events.AutoCompactionEnd:
		return fmt.Sprintf("  event  auto_compaction_end aborted=%v willRetry=%v", e.Aborted, e.WillRetry)
	}
	return ""
}

// runPlain plays the scenarios with plain lines: for a pipe, a log, a test.
func (d *demo) runPlain(env *environment) int {
	w := env.stdout
	fmt.Fprintf(w, "agentfsm demo: %d scenario(s) on the scripted agent, first retry delay %d ms (the library's default is 2000).\n",
		len(d.scenarios), d.baseDelay)
	for _, sc := range d.scenarios {
		fmt.Fprintf(w, "\n== %s: %s\n", sc.name, sc.about)
		var v view.Model
		var mu sync.Mutex
		out := d.play(sc, func(ev events.Event) {
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			v.Apply(ev, now)
			if line := describe(ev); line != "" {
				fmt.Fprintln(w, line)
			}
			for _, l := range v.TakeLines() {
				fmt.Fprintln(w, "  view   "+strings.ReplaceAll(l, "\n", "\n         "))
			}
			// Plain lines show a spinner once, when it appears; the live
			// countdown is the terminal's.
			switch ev.(type) {
			case events.AgentStart, events.AutoRetryStart, events.AutoCompactionStart:
				if sp := v.Spinner(now); sp != "" {
					fmt.Fprintln(w, "  view   ⠿ "+sp)
				}
			}
			if start, ok := ev.(events.AutoRetryStart); ok && sc.autoCancel && start.Attempt == 1 {
				s, wait := d.session(), time.Duration(start.DelayMs)*time.Millisecond/2
				go func() {
					time.Sleep(wait)
					mu.Lock()
					esc := v.Esc()
					fmt.Fprintf(w, "  key    esc, %s into the wait: %s\n", wait, esc)
					mu.Unlock()
					act(s, esc)
				}()
			}
		})
		fmt.Fprintf(w, "outcome: %s: %s\n", sc.name, out)
	}
	return 0
}
