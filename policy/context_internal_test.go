package policy

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/sizes"

	"github.com/agentfsm/agentfsm/transcript"
	"pgregory.net/rapid"
)

// What the runtime context hands out (to a run, to a summarizer) never
// changes afterwards, whatever the engine does to the context next:
// adding messages, removing any of them, compacting; and appending to
// what was handed out never reaches the context (issue item 1). The same
// holds for the last assistant message the check before a prompt reads in
// place (lastAssistant), which may sit before the end of the context.
func TestSharedContextNeverChanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := &Engine{}
		c := &e.ctx
		type read struct {
			at   *transcript.Message
			was  transcript.Message
			text string
		}
		var reads []read
		type handed struct {
			msgs []transcript.Message
			ids  []string
		}
		var out []handed
		n := 0
		// The model of the positions: pos[i] is where msgs[i] is in
		// history, as a map of every message would say (0 for the ones
		// in the context when the positions began to count, and for one
		// whose append failed).
		var pos []int
		var removed []string // IDs no message has now: an agent may reuse one
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 5).Draw(t, "op"); {
			case op == 0 || len(c.msgs) == 0:
				n++
				c.nextSeq++
				prev := c.msgs
				id := fmt.Sprint("m", n)
				if k := len(removed); k > 0 && rapid.Bool().Draw(t, "an ID reused") {
					id = removed[rapid.IntRange(0, k-1).Draw(t, "reused")]
				}
				if c.taken(id) {
					t.Fatalf("%q is taken, and no message has it", id)
				}
				removed = slices.DeleteFunc(removed, func(r string) bool { return r == id })
				indexed := c.seq != nil
				role := transcript.RoleUser
				if n%2 == 0 {
					role = transcript.RoleAssistant
				}
				c.push(transcript.Message{ID: id, Role: role, Content: transcript.TextContent(fmt.Sprint("text ", n))}, c.nextSeq)
				pos = append(pos, c.nextSeq)
				if !indexed && c.seq != nil {
					clear(pos) // the map begins: every message at 0
				}
				if rapid.Bool().Draw(t, "a run's message") {
					c.keepOutgrown(prev)
				} else if rapid.Bool().Draw(t, "the run returned") {
					c.outgrown = nil
				}
			case op == 1:
				i := rapid.IntRange(0, len(c.msgs)-1).Draw(t, "remove")
				if rapid.Bool().Draw(t, "the last") {
					i = len(c.msgs) - 1 // a failed answer, before its retry
				}
				id := c.msgs[i].ID
				if !c.remove(id) {
					t.Fatalf("%q not removed", id)
				}
				pos = slices.Delete(pos, i, i+1)
				removed = append(removed, id)
			case op == 2:
				n++
				c.nextSeq++
				c.compactionSeq = c.nextSeq
				if c.seq == nil {
					c.index() // as record does
					clear(pos)
				}
				i := rapid.IntRange(0, len(c.msgs)-1).Draw(t, "kept")
				if rapid.Bool().Draw(t, "keeps the last only") {
					i = len(c.msgs) - 1
				}
				for _, m := range c.msgs[:i] {
					removed = append(removed, m.ID)
				}
				c.compact(transcript.Entry{Type: transcript.EntryCompaction, ID: fmt.Sprint("c", n), Compaction: &transcript.Compaction{Summary: "s", FirstKeptEntryID: c.msgs[i].ID}}, -1)
				pos = append([]int{c.compactionSeq}, pos[i:]...)
			case op == 3 && c.seq != nil:
				// An append that failed: its message is as old as can be
				// (Appended).
				i := rapid.IntRange(0, len(c.msgs)-1).Draw(t, "append failed")
				if rapid.Bool().Draw(t, "the last's") {
					i = len(c.msgs) - 1
				}
				c.setPosition(c.msgs[i].ID, 0)
				pos[i] = 0
			case op == 5:
				// The check before a prompt.
				if m := e.lastAssistant(); m != nil {
					reads = append(reads, read{at: m, was: *m, text: m.Content[0].Text})
				}
			default:
				from := rapid.IntRange(0, len(c.msgs)).Draw(t, "from")
				msgs := c.share(from, len(c.msgs))
				ids := make([]string, len(msgs))
				for i, m := range msgs {
					ids[i] = m.ID
				}
				out = append(out, handed{msgs, ids})
				// An agent that appends to what it was handed.
				_ = append(msgs, transcript.Message{ID: "appended by the agent"})
			}
			// The estimate kept as the context changes is its estimate.
			if c.est != sizes.Tokens(c.msgs...) {
				t.Fatalf("the kept estimate is %d, the context's %d", c.est, sizes.Tokens(c.msgs...))
			}
			for i, r := range reads {
				if r.at.ID != r.was.ID || r.at.Role != r.was.Role || len(r.at.Content) != 1 || r.at.Content[0].Text != r.text {
					t.Fatalf("the last assistant message read by check %d changed: %q %q %v, was %q %q %q", i, r.at.ID, r.at.Role, r.at.Content, r.was.ID, r.was.Role, r.text)
				}
			}
			for i, h := range out {
				for j, m := range h.msgs {
					if m.ID != h.ids[j] {
						t.Fatalf("handed-out slice %d changed at %d: %q, was %q", i, j, m.ID, h.ids[j])
					}
				}
			}
			// The map holds every message but the last, which it holds
			// unless its position is kept aside (lastSeq).
			lastAside := c.seq != nil && c.lastSeq >= 0
			for i, m := range c.msgs {
				if m.ID == "appended by the agent" {
					t.Fatal("an append to a handed-out slice reached the context")
				}
				if _, ok := c.seq[m.ID]; c.seq != nil && ok == (lastAside && i == len(c.msgs)-1) {
					t.Fatalf("%q in the context: in the map %v, its position kept aside %v", m.ID, ok, lastAside && i == len(c.msgs)-1)
				}
				if !c.taken(m.ID) {
					t.Fatalf("%q in the context is not taken", m.ID)
				}
			}
			if c.taken("m0") {
				t.Fatal("an ID no message has is taken")
			}
			// Every message is where the model says, the last as much as
			// the others (its position kept aside or not), and an ID no
			// message has is nowhere.
			if len(pos) != len(c.msgs) {
				t.Fatalf("the model holds %d positions, the context %d messages", len(pos), len(c.msgs))
			}
			if c.seq != nil {
				for i, m := range c.msgs {
					if got := c.position(m.ID); got != pos[i] {
						t.Fatalf("%q (%d of %d) is at %d, the model says %d", m.ID, i, len(c.msgs), got, pos[i])
					}
				}
				for _, id := range removed {
					if c.taken(id) || c.position(id) != 0 {
						t.Fatalf("%q, which no message has, is taken (%v) at %d", id, c.taken(id), c.position(id))
					}
				}
			}
			if c.seq == nil && (c.compactionSeq > 0 || len(c.msgs) > shortContext) {
				t.Fatalf("no positions for %d messages after compaction %d", len(c.msgs), c.compactionSeq)
			}
			if aside := map[bool]int{true: 1}[lastAside]; c.seq != nil && len(c.seq)+aside != len(c.msgs) {
				t.Fatalf("positions for %d IDs, %d messages: the engine keeps what left the context", len(c.seq), len(c.msgs))
			}
			// The array a run's message outgrew holds the context but
			// its last message.
			if c.outgrown != nil {
				if len(c.outgrown) != len(c.msgs)-1 {
					t.Fatalf("the outgrown array holds %d messages, the context %d", len(c.outgrown), len(c.msgs))
				}
				for i, m := range c.outgrown {
					if m.ID != c.msgs[i].ID {
						t.Fatalf("the outgrown array holds %q at %d, the context %q", m.ID, i, c.msgs[i].ID)
					}
				}
			}
		}
	})
}

// Adding a message and removing the last one change the context in place,
// and a compaction copies only what it keeps (issue item 1).
func TestContextChangesCostWhatTheyChange(t *testing.T) {
	c := runtimeContext{}
	for i := range 1000 {
		c.push(transcript.Message{ID: fmt.Sprint("m", i)}, i+1)
	}
	shared := c.share(0, len(c.msgs))
	c.push(transcript.Message{ID: "error"}, 1001)
	if allocs := testing.AllocsPerRun(100, func() {
		c.remove("error")
		c.push(transcript.Message{ID: "error"}, 1001)
	}); allocs != 0 {
		t.Fatalf("removing the last message and adding one allocated %v times", allocs)
	}
	if &c.msgs[0] != &shared[0] {
		t.Fatal("the context moved to a new array")
	}
	c.compact(transcript.Entry{Type: transcript.EntryCompaction, ID: "c", Compaction: &transcript.Compaction{FirstKeptEntryID: "m990"}}, -1)
	if got := len(c.msgs); got != 12 || cap(c.msgs) > 2*got+8 {
		t.Fatalf("after the compaction: %d messages in an array of %d", got, cap(c.msgs))
	}
	if !slices.Equal([]string{"c", "m990"}, []string{c.msgs[0].ID, c.msgs[1].ID}) {
		t.Fatalf("the compaction left %q, %q first", c.msgs[0].ID, c.msgs[1].ID)
	}
}

// A session waiting out a backoff after its first run's answer failed
// keeps the prompt in the array the run was handed, not one grown for the
// answer the retry removed, and no position map: a short context before
// any compaction needs none (issue 22: a waiting session within 3 KiB).
func TestWaitingContextKeepsNoRoom(t *testing.T) {
	e, err := New(Setup{SessionID: "s", Model: Model{Provider: "p", ID: "m", ContextWindow: 200000}, Config: DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_700_000_000, 0)
	effects, err := e.Prompt(at, "hi")
	if err != nil {
		t.Fatal(err)
	}
	var run RunID
	var handed []transcript.Message
	for _, ef := range effects {
		if ef.Kind == StartRun {
			run, handed = ef.Run, ef.Context
		}
	}
	m := transcript.Message{ID: "a-1", Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError, ErrorMessage: "503 Service Unavailable"}
	for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: m}, events.MessageEnd{Message: m}, events.AgentEnd{}} {
		e.RunEvent(at, run, ev)
	}
	if len(e.ctx.msgs) != 2 {
		t.Fatalf("%d messages before the decision", len(e.ctx.msgs))
	}
	e.RunReturned(at, run, RunReturn{})
	e.Release() // as the driver does, once it has carried the effects out
	if st := e.Status(); st.State != "backoff" {
		t.Fatalf("state %s", st.State)
	}
	if len(e.ctx.msgs) != 1 || cap(e.ctx.msgs) != 1 {
		t.Fatalf("the waiting context holds %d messages in an array of %d", len(e.ctx.msgs), cap(e.ctx.msgs))
	}
	if &e.ctx.msgs[0] != &handed[0] {
		t.Fatal("the waiting context is not in the array the run was handed")
	}
	if e.ctx.seq != nil || e.ctx.outgrown != nil || e.sc != nil {
		t.Fatalf("the waiting engine keeps a position map (%v), an outgrown array (%v) or its input's scratch (%v)", e.ctx.seq != nil, e.ctx.outgrown != nil, e.sc != nil)
	}
	// The retry's run is handed the same array; its answer grows it.
	effects = e.TimerFired(at.Add(time.Hour), e.wait.timer)
	for _, ef := range effects {
		if ef.Kind == StartRun {
			if len(ef.Context) != 1 || ef.Context[0].ID != handed[0].ID {
				t.Fatalf("the retry's run is handed %d messages", len(ef.Context))
			}
		}
	}
}

// TestShortContextKeepsNoPositions: a context of shortContext messages
// before any compaction keeps no position map (each message is at 0, as a
// lookup in none says); the next message makes it.
func TestShortContextKeepsNoPositions(t *testing.T) {
	c := runtimeContext{}
	for i := range shortContext {
		c.push(transcript.Message{ID: fmt.Sprint("m", i)}, i+1)
	}
	if c.seq != nil {
		t.Fatalf("a context of %d messages keeps a position map", len(c.msgs))
	}
	c.push(transcript.Message{ID: "next"}, shortContext+1)
	if c.seq == nil {
		t.Fatalf("a context of %d messages keeps no position map", len(c.msgs))
	}
	if got := c.position("m0"); got != 0 {
		t.Fatalf("a message pushed before the map is at %d, want 0", got)
	}
}

// TestFailedAppendMovesItsMessagesFirst: a message whose entry the history
// failed to append is in no history, so the context holds it as old as can
// be (position 0), still a message of the context; the positions of the
// messages appended before it stand.
func TestFailedAppendMovesItsMessagesFirst(t *testing.T) {
	e, err := New(Setup{SessionID: "s", Model: Model{Provider: "p", ID: "m", ContextWindow: 200000}, Config: DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_700_000_000, 0)
	var first string
	for i := range shortContext {
		run, id := promptRun(t, e, at, fmt.Sprint("question ", i))
		if i == 0 {
			first = id
		}
		answerRun(e, at, run, transcript.Message{ID: fmt.Sprint("a-", i), Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Content: transcript.TextContent("answer")})
		e.Release()
	}
	if e.ctx.seq == nil {
		t.Fatal("no position map after 16 messages")
	}
	effects, err := e.Prompt(at, "the last question")
	if err != nil {
		t.Fatal(err)
	}
	_, last := startedRun(t, effects) // unreleased: Appended undoes what it appended
	if got := e.ctx.position(last); got != 2*shortContext+1 {
		t.Fatalf("the prompt appended is at %d, want %d", got, 2*shortContext+1)
	}
	e.Appended(at, errors.New("disk full"))
	if got := e.ctx.position(last); got != 0 || !e.ctx.taken(last) {
		t.Fatalf("the prompt whose append failed is at %d (taken %v), want 0 and taken", got, e.ctx.taken(last))
	}
	if got := e.ctx.position(first); got != 0 {
		t.Fatalf("the first prompt, in the context before its map, is at %d, want 0", got)
	}
	if got := e.ctx.position(fmt.Sprint("a-", shortContext-1)); got != 2*shortContext {
		t.Fatalf("the answer before the failed prompt is at %d, want %d", got, 2*shortContext)
	}
}
