package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
)

// errInterrupted ends a conversation interrupted between two turns.
var errInterrupted = errors.New("interrupted")

func runChat(args []string, env *environment) int {
	fs := newFlagSet("chat", "agentfsm chat --provider anthropic|openai [--model ID] [--base-url URL] [--context-window N] "+
		"[--settings FILE|reference|patient] [--summarizer digest|model] [--history FILE] [--events | --quiet] [--tools] [--timeout DURATION] [--log-level LEVEL] [PROMPT...]\n\n"+
		"With a prompt in the arguments (after the flags), runs one turn and prints the answer.\n"+
		"Without one, each line of stdin is a prompt of one conversation, answered in turn\n"+
		"(a turn that fails prints its error and the conversation goes on; the exit status\n"+
		"is 1 if any turn failed); on a terminal, an interactive chat.\n\n"+
		"Each retry, wait, compaction and credential switch is one line on stderr\n"+
		"(\"agentfsm chat: retrying in 2s (attempt 1 of 3): 529 overloaded_error: Overloaded\"),\n"+
		"counting down in place when stderr is a terminal.\n\n"+
		"The key is ANTHROPIC_API_KEY or OPENAI_API_KEY, or, when the settings list \"credentials\",\n"+
		"each one's environment variable: a usage limit switches to the next credential's key.")
	be := addBackendFlags(fs, true)
	settingsPath := fs.String("settings", "", settingsHelp)
	historyPath := fs.String("history", "", "keep the conversation in this JSON-lines `file`, resuming what it holds, with what the session did to recover (agentfsm inspect FILE tells it)")
	showEvents := fs.Bool("events", false, "write every session event to stderr as a JSON line (the RPC wire form), instead of the lines in words")
	quiet := fs.Bool("quiet", false, "write no line in words about retries, waits, compactions and credential switches (errors still are)")
	summarizer := fs.String("summarizer", "model", summarizerHelp)
	withTools := fs.Bool("tools", false, "let the model read files and list directories under the working directory (read-only; a path outside it is refused)")
	timeout := fs.Duration("timeout", 0, "end a turn that takes longer than this `duration` (such as 90s or 5m), retries included; 0: no limit")
	tel := addTelemetryFlags(fs)
	if code := fs.parseArgs(args, env); code >= 0 {
		return code
	}
	words := !*showEvents && !*quiet
	fail := func(code int, format string, a ...any) int {
		// The text may hold what a server sent (a turn's error).
		fmt.Fprintf(env.stderr, "agentfsm chat: %s\n", terminalSafe(fmt.Sprintf(format, a...), false))
		return code
	}
	if *timeout < 0 {
		return fail(2, "--timeout must not be negative, got %s", *timeout)
	}
	summarizerName, err := be.summarizerName(fs, *summarizer)
	if err != nil {
		return fail(2, "%v", err)
	}
	if err := tel.start(env, "agentfsm"); err != nil {
		return fail(2, "%v", err)
	}
	defer tel.shutdown()
	set, err := loadSettings(*settingsPath)
	if err != nil {
		return fail(2, "%v", err)
	}
	var tools []tool
	if *withTools {
		root, err := os.OpenRoot(".")
		if err != nil {
			return fail(2, "--tools: %v", err)
		}
		defer root.Close()
		tools = readOnlyTools(root)
	}
	agent, model, err := be.agent(env.lookupEnv, tools, len(set.credentials) > 0)
	if err != nil {
		return fail(2, "%v", err)
	}
	creds, err := set.store(model.Provider, env.lookupEnv)
	if err != nil {
		return fail(2, "--settings: %v", err)
	}
	var prompts func(context.Context) (string, error)
	tui := false
	switch {
	case fs.NArg() > 0:
		p := strings.Join(fs.Args(), " ")
		if strings.TrimSpace(p) == "" {
			return fail(2, "the prompt is blank")
		}
		prompts = onePrompt(p)
	case isTerminal(env.stdin):
		if !interactive(env) {
			return fail(2, "give a prompt after the flags, or prompts on stdin, one a line (the interactive chat needs stdout on the terminal too)")
		}
		if tel.logsTo(env.stderr) {
			return fail(2, "--log-level writes to stderr, the terminal the interactive chat draws on: send it elsewhere (2>FILE)")
		}
		tui = true
	default:
		prompts = linePrompts(env.stdin)
	}
	opts := []session.Option{session.WithModel(model), session.WithConfig(set.config)}
	if creds != nil {
		opts = append(opts, session.WithCredentials(creds))
	}
	summary, err := be.summarizer(summarizerName, env.lookupEnv)
	if err != nil {
		return fail(2, "%v", err)
	}
	opts = append(opts, summary...)
	var resumed *policy.Snapshot
	waitPath := ""
	if *historyPath != "" {
		h, err := history.OpenFileHistory(*historyPath)
		if err != nil {
			return fail(2, "--history: %v", err)
		}
		defer h.Close()
		opts = append(opts, session.WithHistory(h), session.WithRecoveryHistory(true))
		waitPath = waitFile(*historyPath)
		snap, ok, err := readWaitFile(waitPath)
		if err != nil {
			fmt.Fprintf(env.stderr, "agentfsm chat: --history: the turn that waited for a usage limit's reset cannot be resumed: %s; the conversation goes on without it\n",
				terminalSafe(err.Error(), false))
			os.Remove(waitPath)
		}
		if ok {
			resumed = &snap
		}
	}
	opts = append(opts, tel.options()...)
	var s *session.Session
	if resumed != nil {
		s, err = session.New(agent, append(slices.Clone(opts), session.WithSnapshot(*resumed))...)
		if errors.Is(err, policy.ErrSnapshot) {
			fmt.Fprintf(env.stderr, "agentfsm chat: --history: the turn that waited for a usage limit's reset cannot be resumed: %s; the conversation goes on without it\n",
				terminalSafe(err.Error(), false))
			os.Remove(waitPath)
			resumed = nil
		}
	}
	if resumed == nil {
		s, err = session.New(agent, opts...)
	}
	if err != nil {
		return fail(2, "%v", err)
	}
	defer s.Close()
	tel.attach(s)
	var terminating atomic.Bool
	var narr *narrator
	if tui {
		// The interactive chat draws on the terminal stderr is: its view
		// shows the waits and compactions instead.
		var stop func()
		narr, stop = keepResetWaits(s, env.stderr, waitPath, terminating.Load)
		defer stop()
	} else {
		// A live countdown only where nothing else writes lines: not
		// with --log-level's log on the same terminal.
		width := 0
		if isTerminal(env.stderr) && !tel.logsTo(env.stderr) {
			width = terminalWidth(env.stderr)
		}
		var stop func()
		narr, stop = narrate(s, env.stderr, words, width, waitPath, terminating.Load)
		defer stop()
		if words {
			defer sayFallbacks(s, env.stderr)()
		}
	}
	if *showEvents {
		s.Subscribe(func(ev events.Event) {
			if b, err := rpc.MarshalEvent(ev); err == nil {
				env.stderr.Write(append(b, '\n'))
			}
		})
	}
	if tui {
		return runChatTUI(s, env, *timeout, narr)
	}
	// SIGINT or SIGTERM aborts the turn in flight, which then ends as any
	// failed turn does; a second signal kills.
	// A SIGTERM is the process being stopped, not the user: a turn
	// waiting for a reset keeps its snapshot (keepResetWaits) and resumes
	// when chat starts again on the same history.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	go func() {
		select {
		case sig := <-signals:
			terminating.Store(sig == syscall.SIGTERM)
			signal.Stop(signals)
			cancel()
		case <-ctx.Done():
		}
	}()
	// A turn that fails is said on stderr and the conversation goes on
	// with the next prompt; the exit status says that one failed. A
	// signal ends the conversation after the turn it aborted.
	failed := false
	if resumed != nil && resumed.Turn {
		err := resumeTurn(ctx, s, env, *resumed, words)
		if !terminating.Load() {
			os.Remove(waitPath) // the turn settled: nothing to resume
		}
		if errors.Is(err, errWriting) {
			return fail(1, "%v", err)
		}
		if err != nil {
			fail(1, "%v", err)
			failed = true
		}
	}
	for ctx.Err() == nil {
		p, err := prompts(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(1, "%v", err)
		}
		err = prompt(ctx, s, p, *timeout)
		s.Flush() // the turn's events before its outcome
		if err != nil {
			fail(1, "%s", turnError(err, *timeout, narr))
			failed = true
			continue
		}
		if _, err := fmt.Fprintln(env.stdout, answer(s.Messages())); err != nil {
			return fail(1, "writing output: %v", err)
		}
	}
	if failed || ctx.Err() != nil {
		return 1
	}
	return 0
}

// errWriting marks a failure to write chat's output, which ends it.
var errWriting = errors.New("writing output")

// resumeTurn waits for the turn restored from snap, which waited for a
// usage limit's reset when chat last stopped, to settle, and prints its
// answer; ctx ending (a signal) aborts it. Its error is the turn's. With
// words, stderr says that it resumes (not with --events, whose stderr
// holds event lines only).
func resumeTurn(ctx context.Context, s *session.Session, env *environment, snap policy.Snapshot, words bool) error {
	settled := make(chan error, 1)
	unsubscribe := s.Subscribe(func(ev events.Event) {
		if e, ok := ev.(events.TurnSettled); ok {
			select {
			case settled <- e.Err:
			default:
			}
		}
	})
	defer unsubscribe()
	when := "now"
	if snap.Deadline != nil {
		when = snap.Deadline.UTC().Format(time.RFC3339)
	}
	if words {
		fmt.Fprintf(env.stderr, "agentfsm chat: resuming the turn that waits for a usage limit's reset (the retry goes at %s)\n", when)
	}
	var err error
	if st := s.Status(); st.State == states.Idle && !st.Streaming && !st.Compacting {
		// It settled before the subscription: its messages say how.
	} else {
		select {
		case err = <-settled:
		case <-ctx.Done():
			s.Abort()
			err = <-settled
		}
	}
	s.Flush()
	if err != nil {
		return err
	}
	if _, err = fmt.Fprintln(env.stdout, answer(s.Messages())); err != nil {
		return fmt.Errorf("%w: %w", errWriting, err)
	}
	return nil
}

// prompt runs one turn of s, ended by ctx or, when timeout is not 0,
// after timeout.
func prompt(ctx context.Context, s *session.Session, p string, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return s.Prompt(ctx, p)
}

// answer is the text of the last assistant message of msgs.
func answer(msgs []transcript.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == transcript.RoleAssistant {
			return msgs[i].Text()
		}
	}
	return ""
}

// onePrompt returns p, then io.EOF.
func onePrompt(p string) func(context.Context) (string, error) {
	done := false
	return func(context.Context) (string, error) {
		if done {
			return "", io.EOF
		}
		done = true
		return p, nil
	}
}

// linePrompts returns the lines of r that are not blank, one a call, then
// io.EOF (or the read's error). A call returns errInterrupted when ctx
// ends first; the read it waited for stays with r.
func linePrompts(r io.Reader) func(context.Context) (string, error) {
	type line struct {
		text string
		err  error
	}
	lines := make(chan line)
	var once sync.Once
	start := func() {
		go func() {
			br := bufio.NewReader(r)
			for {
				text, err := br.ReadString('\n')
				text = strings.TrimRight(text, "\r\n")
				if strings.TrimSpace(text) != "" {
					lines <- line{text: text}
				}
				if err != nil {
					lines <- line{err: err}
					close(lines)
					return
				}
			}
		}()
	}
	return func(ctx context.Context) (string, error) {
		once.Do(start)
		select {
		case l, ok := <-lines:
			if !ok {
				return "", io.EOF
			}
			if l.err != nil && l.err != io.EOF {
				return "", fmt.Errorf("reading stdin: %w", l.err)
			}
			return l.text, l.err
		case <-ctx.Done():
			return "", errInterrupted
		}
	}
}

// terminalSafe returns s with every control character a terminal would act
// on (C0 but the tab, DEL, C1) and every bidirectional formatting character
// (which can make text read otherwise than it is) written as a Go escape:
// "\x1b", "\u009b", "\u202e". With keepLines a "\n" stays a line break;
// without, it is written "\n", so s is one line. A server's text (an error
// message, an answer) thus reaches the terminal as text, not as commands.
func terminalSafe(s string, keepLines bool) string {
	unsafe := func(r rune) bool {
		if r == '\t' || (keepLines && r == '\n') {
			return false
		}
		return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
	}
	if !strings.ContainsFunc(s, unsafe) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !unsafe(r):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}
