package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
	"github.com/charmbracelet/x/term"
)

// chat tells what its session does on stderr, one line in words each
// (unless --events, whose stderr holds event lines only, or --quiet):
//
//	agentfsm chat: retrying in 2s (attempt 1 of 3): 529 overloaded_error: Overloaded
//	agentfsm chat: usage_limit: waiting until 2026-01-01T15:00:00Z (3s) for the limit to reset, then the turn goes on (Ctrl-C stops)
//	agentfsm chat: the limit reset; the turn went on after waiting for it
//	agentfsm chat: usage limit on credential "first": switching to the next credential, retrying now (attempt 1 of 3): 429 …
//	agentfsm chat: compacting the conversation: the context overflowed
//	agentfsm chat: compacted the conversation: 213462 tokens → 1204; the turn goes on
//
// On a terminal (liveWidth > 0), the line of a wait counts down in place
// each second and stays, once the wait ends, as it would be written to a
// file; a compaction's first line shows the time it has taken so far.
//
// The same subscriber keeps a turn waiting for a reset for a restart (the
// snapshot beside the history, resetwait.go), writing the snapshot before
// the words that announce the wait, and remembers the error a turn was
// retrying when it ended, for the turn's own error line (retryingWhen).

// narrator is chat's subscriber that says what the session does; see
// narrate.
type narrator struct {
	w     io.Writer
	words bool
	// liveWidth is the terminal's width when stderr is a terminal that
	// shows countdowns, else 0.
	liveWidth int
	path      string      // where a turn waiting for a reset is kept; "" without a history
	keep      func() bool // reports that a settled turn's wait is kept for a restart
	now       func() time.Time

	// The subscriber's own state, touched only by its deliveries.
	start      events.AutoRetryStart // the chain's latest retry, since its AutoRetryStart
	waiting    bool                  // a wait's live line is shown: the next event ends it
	compacting bool                  // a compaction's live line is shown: its end ends it

	mu       sync.Mutex
	chain    *events.AutoRetryStart // the latest retry of the turn in flight, until a retry succeeds
	settled  *events.AutoRetryStart // chain, as it was when the turn settled
	live     func() string          // the live line's text now; nil when none is shown
	stopLive chan struct{}
	liveDone chan struct{}
}

// narrate subscribes a narrator to s: see the comment at the top of this
// file. words says whether to write lines in words, liveWidth > 0 that
// stderr is a terminal that width wide, path and keep are for the wait
// kept for a restart (keepResetWaits). The returned function unsubscribes
// and ends a countdown still shown.
func narrate(s *session.Session, stderr io.Writer, words bool, liveWidth int, path string, keep func() bool) (*narrator, func()) {
	n := &narrator{w: stderr, words: words, liveWidth: liveWidth, path: path, keep: keep, now: time.Now}
	unsubscribe := s.SubscribeSession(n.apply)
	return n, func() {
		unsubscribe()
		n.endLive()
	}
}

// keepResetWaits is narrate for the interactive chat, which shows waits on
// its own screen: it only keeps a turn waiting for a reset for a restart.
func keepResetWaits(s *session.Session, stderr io.Writer, path string, keep func() bool) (*narrator, func()) {
	return narrate(s, stderr, false, 0, path, keep)
}

// apply takes one event of s.
func (n *narrator) apply(s *session.Session, ev events.Event) {
	_, compacted := ev.(events.AutoCompactionEnd)
	_, settled := ev.(events.TurnSettled)
	if n.waiting || (n.compacting && (compacted || settled)) {
		// Whatever follows a wait ends it: the continuation's run, the
		// chain cancelled, the turn aborted.
		n.waiting, n.compacting = false, false
		n.endLive()
	}
	switch e := ev.(type) {
	case events.AutoRetryStart:
		n.start = e
		n.mu.Lock()
		n.chain = &e
		n.mu.Unlock()
	case events.StateChange:
		switch e.Trigger {
		case transitions.Retry:
			n.wait(n.start, false)
		case transitions.WaitReset:
			// The snapshot first, the words after: once they are out,
			// a restart resumes the wait.
			n.keepWait(s)
			n.wait(n.start, true)
		case transitions.RetryNow:
			cred := ""
			if n.start.Credential != "" {
				cred = fmt.Sprintf(" on credential %q", n.start.Credential)
			}
			n.say(fmt.Sprintf("%s%s: switching to the next credential, retrying now (%s): %s",
				strings.ReplaceAll(n.start.ErrorClass.String(), "_", " "), cred, attempt(n.start), oneLine(n.start.ErrorMessage)))
		}
	case events.SharedLimitWait:
		n.say(fmt.Sprintf("the shared limit on %s (%s) holds this session: waiting until %s UTC, in %s",
			oneLine(e.Key), oneLine(e.Reason), e.Until.UTC().Format(time.TimeOnly), roundDelay(max(e.Until.Sub(n.now()), 0))))
	case events.AutoRetryEnd:
		if e.Success {
			n.mu.Lock()
			n.chain = nil
			n.mu.Unlock()
		}
		if e.ResetWait && e.Success {
			n.say("the limit reset; the turn went on after waiting for it")
		}
	case events.AutoCompactionStart:
		what := "compacting the conversation: " + compactionReason(e.Reason)
		if n.liveWidth > 0 && n.words {
			began := n.now()
			took := func(now time.Time) string { return fmt.Sprintf("%s… %s", what, now.Sub(began).Round(time.Second)) }
			n.showLive(what, took(began), func() string { return took(n.now()) })
			n.compacting = true
		} else {
			n.say(what)
		}
	case events.AutoCompactionEnd:
		switch {
		case e.Aborted:
			n.say("the compaction was cancelled")
		case e.Result != nil:
			line := "compacted the conversation"
			if r := e.Result; r.TokensBefore > 0 && r.TokensAfter > 0 {
				line += fmt.Sprintf(": %d tokens → %d", r.TokensBefore, r.TokensAfter)
			} else if r.TokensBefore > 0 {
				line += fmt.Sprintf(": it held %d tokens", r.TokensBefore)
			}
			if e.WillRetry {
				line += "; the turn goes on"
			}
			n.say(line)
		case e.ErrorMessage != "":
			n.say("the compaction failed: " + oneLine(e.ErrorMessage))
		default:
			n.say("the compaction failed: nothing to compact")
		}
	case events.TurnSettled:
		n.mu.Lock()
		n.settled, n.chain = n.chain, nil
		n.mu.Unlock()
		if n.path != "" && !n.keep() {
			if err := os.Remove(n.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				n.warn("--history: " + err.Error())
			}
		}
	}
}

// wait says that the session waits before its next retry: the chain's
// delay, or a usage limit's reset.
func (n *narrator) wait(start events.AutoRetryStart, reset bool) {
	if !n.words {
		return
	}
	delay := time.Duration(start.DelayMs) * time.Millisecond
	now := n.now()
	until := now.Add(delay)
	if reset && !start.ResetAt.IsZero() {
		until = start.ResetAt
	}
	text := func(left time.Duration) string {
		if reset {
			return fmt.Sprintf("%s: waiting until %s (%s) for the limit to reset, then the turn goes on (Ctrl-C stops)",
				start.ErrorClass, start.ResetAt.UTC().Format(time.RFC3339), roundDelay(left))
		}
		return fmt.Sprintf("retrying in %s (%s): %s", roundDelay(left), attempt(start), oneLine(start.ErrorMessage))
	}
	if n.liveWidth == 0 {
		n.say(text(delay))
		return
	}
	left := func(now time.Time) string { return text(max(until.Sub(now), 0)) }
	n.showLive(text(delay), left(now), func() string { return left(n.now()) })
	n.waiting = true
}

// attempt is a retry's number and its limits, in words: "attempt 1 of 3",
// "attempt 4, no count limit, 52s of the 1m0s budget left".
func attempt(e events.AutoRetryStart) string {
	s := fmt.Sprintf("attempt %d of %d", e.Attempt, e.MaxAttempts)
	if e.MaxAttempts < 0 {
		s = fmt.Sprintf("attempt %d, no count limit", e.Attempt)
	}
	if e.MaxElapsedMs > 0 {
		s += fmt.Sprintf(", %s of the %s budget left",
			roundDelay(time.Duration(e.RemainingMs)*time.Millisecond), roundDelay(time.Duration(e.MaxElapsedMs)*time.Millisecond))
	}
	return s
}

// roundDelay is d for a human: to the millisecond under a second, to a
// tenth of a second under ten, to the second above.
func roundDelay(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// compactionReason says why a compaction runs.
func compactionReason(r transcript.CompactionReason) string {
	switch r {
	case transcript.ReasonOverflow:
		return "the context overflowed"
	case transcript.ReasonThreshold:
		return "the context nears the model's window"
	}
	return string(r)
}

// say writes one line in words.
func (n *narrator) say(line string) {
	if !n.words {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.w, "agentfsm chat: %s\n", line)
}

// warn writes one line whatever words says: something went wrong.
func (n *narrator) warn(line string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.w, "agentfsm chat: %s\n", oneLine(line))
}

// keepWait writes s's snapshot for a restart, when chat keeps a history.
func (n *narrator) keepWait(s *session.Session) {
	if n.path == "" {
		return
	}
	snap, err := s.Snapshot()
	if err == nil {
		err = writeWaitFile(n.path, snap)
	}
	if err != nil {
		n.warn("--history: cannot keep the wait for a restart: " + err.Error())
	}
}

// showLive shows first now, on a line that line rewrites each second until
// endLive, which leaves final on it. first is the line as of the instant
// the caller counts from (a countdown starts at its whole delay, however
// long the caller took to get here).
func (n *narrator) showLive(final, first string, line func() string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.live = func() string { return final }
	n.drawLive(first)
	stop, done := make(chan struct{}), make(chan struct{})
	n.stopLive, n.liveDone = stop, done
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				text := line()
				n.mu.Lock()
				n.drawLive(text)
				n.mu.Unlock()
			}
		}
	}()
}

// drawLive rewrites the live line with text, cut to the terminal's width so
// that it never wraps (a wrapped line would not be rewritten whole).
// n.mu is held.
func (n *narrator) drawLive(text string) {
	text = "agentfsm chat: " + text
	if utf8.RuneCountInString(text) >= n.liveWidth {
		r := []rune(text)
		text = string(r[:max(n.liveWidth-2, 0)]) + "…"
	}
	fmt.Fprintf(n.w, "\r\x1b[K%s", text)
}

// endLive ends the live line, if one is shown: its countdown stops and the
// line is left as a file would hold it, ended.
func (n *narrator) endLive() {
	n.mu.Lock()
	stop, done := n.stopLive, n.liveDone
	n.stopLive, n.liveDone = nil, nil
	n.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.w, "\r\x1b[Kagentfsm chat: %s\n", n.live())
	n.live = nil
}

// retryingWhen returns the retry the last settled turn was in the middle
// of when it ended (the latest of a chain that had not recovered), and
// whether there was one.
func (n *narrator) retryingWhen() (events.AutoRetryStart, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.settled == nil {
		return events.AutoRetryStart{}, false
	}
	return *n.settled, true
}

// turnError is the line that says why a turn failed: err, and when the
// turn ran past --timeout, the timeout and the error the turn was retrying
// then (the bare context error names neither).
func turnError(err error, timeout time.Duration, n *narrator) string {
	if timeout <= 0 || !errors.Is(err, context.DeadlineExceeded) {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the turn ran past --timeout %s", timeout)
	if n != nil {
		if start, ok := n.retryingWhen(); ok {
			fmt.Fprintf(&b, " while retrying (%s) after: %s", attempt(start), start.ErrorMessage)
		}
	}
	fmt.Fprintf(&b, "; %v", err)
	return b.String()
}

// terminalWidth is the width of the terminal v is open on, 80 when it
// cannot be read.
func terminalWidth(v any) int {
	width := 0
	if f, ok := v.(*os.File); ok {
		if conn, err := f.SyscallConn(); err == nil {
			_ = conn.Control(func(fd uintptr) { width, _, _ = term.GetSize(fd) })
		}
	}
	if width <= 0 {
		return 80
	}
	return width
}
