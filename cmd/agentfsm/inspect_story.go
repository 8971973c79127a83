package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/transcript"
)

// A story is what "agentfsm inspect" tells of a history: its turns, each
// with what happened to its calls and how the session recovered. It is
// built one entry at a time (storyBuilder.add), so that a history of any
// length is read as a stream; only the story's lines are kept.
type story struct {
	// Entries counts the entries read; Recovery, the recovery entries
	// among them (none in a history written without them).
	Entries  int `json:"entries"`
	Recovery int `json:"recoveryEntries"`
	// First and Last are the first and last entries' timestamps (ms).
	First int64        `json:"first,omitempty"`
	Last  int64        `json:"last,omitempty"`
	Turns []*storyTurn `json:"turns"`
}

// storyTurn is one user turn: its prompt and what followed. Turn 0 holds
// what came before the first prompt (a compaction, say), when anything
// did.
type storyTurn struct {
	N      int          `json:"turn"`
	At     int64        `json:"at,omitempty"`
	Line   int          `json:"line,omitempty"`
	Prompt string       `json:"prompt,omitempty"`
	Steps  []storyEvent `json:"steps"`
	// Failed reports that the turn ended in an error: a recorded turn
	// failure, or (in a history without recovery entries) a failed call
	// that was neither retried nor followed by an answer.
	Failed bool `json:"failed,omitempty"`
}

// storyEvent is one line of a turn: when (ms since the Unix epoch), the
// history line it comes from, what happened and its details.
type storyEvent struct {
	At     int64  `json:"at"`
	Line   int    `json:"line"`
	What   string `json:"what"`
	Detail string `json:"detail,omitempty"`
}

// The kinds of step, as the story names them.
const (
	whatCallFailed       = "call failed"
	whatAnswer           = "answer"
	whatRetry            = "retry"
	whatWaitReset        = "wait for reset"
	whatCredential       = "credential switch"
	whatRecovered        = "recovered"
	whatExhausted        = "exhausted"
	whatChainFailed      = "chain failed"
	whatCompaction       = "compaction"
	whatCompactionFailed = "compaction failed"
	whatTurnFailed       = "turn failed"
	whatFallback         = "fallback"
	whatRemoved          = "retried"
)

// storyBuilder builds a story from entries given in order.
type storyBuilder struct {
	s story
	// failed maps the ID of each failed call of the turn to its step,
	// so that its removal (a retry) or a compaction can be told apart
	// from a failure that ended the turn.
	failed map[string]int
	// recorded are the failed calls whose retry a recovery entry told.
	recorded map[string]bool
	// removal is a removal of a failed call not told by a recovery entry,
	// held until the next entry: a compaction then tells it (an
	// overflow), anything else makes it a retry.
	removal *storyEvent
	// prompts counts the turns.
	prompts int
}

func newStoryBuilder() *storyBuilder {
	return &storyBuilder{failed: map[string]int{}, recorded: map[string]bool{}}
}

// turn is the turn in progress, turn 0 before the first prompt.
func (b *storyBuilder) turn() *storyTurn {
	if len(b.s.Turns) == 0 {
		b.s.Turns = append(b.s.Turns, &storyTurn{N: 0})
	}
	return b.s.Turns[len(b.s.Turns)-1]
}

func (b *storyBuilder) step(at int64, line int, what, detail string) {
	t := b.turn()
	t.Steps = append(t.Steps, storyEvent{At: at, Line: line, What: what, Detail: detail})
}

// add reads entry e, from line line of the history.
func (b *storyBuilder) add(e transcript.Entry, line int) {
	b.s.Entries++
	if b.s.First == 0 {
		b.s.First = e.Timestamp
	}
	b.s.Last = max(b.s.Last, e.Timestamp)
	if b.removal != nil {
		r := b.removal
		b.removal = nil
		if e.Type != transcript.EntryCompaction {
			b.step(r.At, r.Line, r.What, r.Detail)
		}
	}
	switch e.Type {
	case transcript.EntryMessage:
		b.message(e, line)
	case transcript.EntryRemoval:
		if _, ok := b.failed[e.ID]; ok && !b.recorded[e.ID] {
			b.removal = &storyEvent{At: e.Timestamp, Line: line, What: whatRemoved, Detail: "the failed call was removed and the turn went on (delay and class not recorded)"}
		}
		delete(b.failed, e.ID)
	case transcript.EntryCompaction:
		b.compaction(e, line)
	case transcript.EntryRecovery:
		b.s.Recovery++
		b.recovery(e, line)
	}
}

func (b *storyBuilder) message(e transcript.Entry, line int) {
	m := e.Message
	switch {
	case m.Role == transcript.RoleUser:
		b.endTurn()
		b.prompts++
		b.s.Turns = append(b.s.Turns, &storyTurn{N: b.prompts, At: e.Timestamp, Line: line, Prompt: excerpt(m.Text(), 60)})
	case m.IsError():
		detail := oneLine(m.ErrorMessage)
		if m.HTTPStatus != 0 && !strings.HasPrefix(detail, strconv.Itoa(m.HTTPStatus)) {
			detail = "HTTP " + strconv.Itoa(m.HTTPStatus) + ": " + detail
		}
		if m.Model != "" {
			detail += " [" + m.Model + "]"
		}
		b.step(e.Timestamp, line, whatCallFailed, detail)
		t := b.turn()
		b.failed[e.ID] = len(t.Steps) - 1
	case m.Role == transcript.RoleAssistant:
		detail := string(m.StopReason)
		if m.Model != "" {
			detail += " [" + m.Model + "]"
		}
		b.step(e.Timestamp, line, whatAnswer, detail)
		clear(b.failed)
	}
}

func (b *storyBuilder) compaction(e transcript.Entry, line int) {
	c := e.Compaction
	detail := string(c.Reason) + ": " + strconv.Itoa(c.TokensBefore) + " tokens"
	if c.TokensAfter > 0 {
		detail += " → " + strconv.Itoa(c.TokensAfter)
	}
	detail += ", kept from " + c.FirstKeptEntryID
	if n := len(c.Truncated); n > 0 {
		parts := make([]string, n)
		for i, t := range c.Truncated {
			parts[i] = fmt.Sprintf("%s to %d bytes", t.EntryID, t.KeptChars)
		}
		detail += ", truncated " + strings.Join(parts, ", ")
	}
	b.step(e.Timestamp, line, whatCompaction, detail)
	clear(b.failed) // an overflow's failed call was removed for it
}

func (b *storyBuilder) recovery(e transcript.Entry, line int) {
	r := e.Recovery
	at := e.Timestamp
	if _, id, ok := strings.Cut(e.ID, ":"); ok {
		b.recorded[id] = true
	}
	classErr := classed(r.Class, r.Error)
	switch r.Kind {
	case transcript.RecoveryRetry:
		what, detail := whatRetry, ""
		if r.ResetAt != 0 {
			what = whatWaitReset
			detail = "until " + clock(r.ResetAt) + " (" + durationMs(r.DelayMs) + "), "
		} else {
			detail = "in " + durationMs(r.DelayMs) + ", "
		}
		detail += "attempt " + strconv.Itoa(r.Attempt)
		if r.MaxAttempts > 0 {
			detail += " of " + strconv.Itoa(r.MaxAttempts)
		}
		if r.MaxElapsedMs > 0 {
			detail += ", " + durationMs(r.ElapsedMs) + " of " + durationMs(r.MaxElapsedMs) + " budget used"
		}
		if classErr != "" {
			detail += "; " + classErr
		}
		if r.CredentialSwitched {
			from := r.Credential
			if from == "" {
				from = "the credential"
			}
			b.step(at, line, whatCredential, "from "+from+" (usage limit): the retry goes at once on the next free credential")
		}
		b.step(at, line, what, detail)
	case transcript.RecoveryChainEnd:
		retries := plural(r.Attempt, "retry", "retries")
		switch r.Outcome {
		case "recovered":
			b.step(at, line, whatRecovered, "after "+retries)
		case "exhausted":
			detail := "after " + retries + ", " + limitText(r.Limit)
			if classErr != "" {
				detail += "; " + classErr
			}
			b.step(at, line, whatExhausted, detail)
		default:
			detail := r.Outcome + " after " + retries
			if classErr != "" {
				detail += "; " + classErr
			}
			b.step(at, line, whatChainFailed, detail)
		}
	case transcript.RecoveryCompactionFailed:
		b.step(at, line, whatCompactionFailed, r.Reason+": "+oneLine(r.Error))
	case transcript.RecoveryTurnFailed:
		b.step(at, line, whatTurnFailed, classErr)
		b.turn().Failed = true
		clear(b.failed)
	case transcript.RecoveryFallback:
		detail := "from " + r.From + " to " + r.To
		if r.Reason != "" {
			detail += " (" + r.Reason + ")"
		}
		if r.Until != 0 {
			detail += ", until " + clock(r.Until)
		}
		b.step(at, line, whatFallback, detail)
	default:
		// A kind of a later version: shown as it is.
		data, _ := json.Marshal(r)
		b.step(at, line, string(r.Kind), oneLine(string(data)))
	}
}

// endTurn closes the turn in progress. In a history without recovery
// entries, a failed call that was neither removed nor answered ended it.
func (b *storyBuilder) endTurn() {
	if b.removal != nil {
		r := b.removal
		b.removal = nil
		b.step(r.At, r.Line, r.What, r.Detail)
	}
	if len(b.s.Turns) > 0 && len(b.failed) > 0 {
		t := b.turn()
		if !t.Failed {
			t.Failed = true
			last := t.Steps[len(t.Steps)-1]
			if last.What == whatCallFailed {
				b.step(last.At, last.Line, whatTurnFailed, "on that error (its class and the limit reached not recorded)")
			}
		}
	}
	clear(b.failed)
}

// finish returns the story once every entry was added.
func (b *storyBuilder) finish() *story {
	b.endTurn()
	return &b.s
}

// classed is "class: error", or either alone.
func classed(class, err string) string {
	err = oneLine(err)
	switch {
	case class == "":
		return err
	case err == "":
		return class
	}
	return class + ": " + err
}

func limitText(limit string) string {
	switch limit {
	case "retries":
		return "limit: retry.maxRetries (or a retry hint above retry.maxDelayMs)"
	case "elapsed":
		return "limit: retry.maxElapsedMs, the chain's time budget"
	case "reset":
		return "limit: the reset is further than retry.maxResetWaitMs"
	case "":
		return "limit not recorded"
	}
	return "limit: " + limit
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// durationMs writes ms as a short duration: "1ms", "2s", "1m30s".
func durationMs(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).String()
}

// clock writes ms since the Unix epoch as a UTC time of day with
// milliseconds.
func clock(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("15:04:05.000")
}

// oneLine is s on one line, without control characters (a history's text
// reaches a terminal).
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return terminalSafe(s, false)
}

// excerpt is s on one line, cut to at most n runes with "…".
func excerpt(s string, n int) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
