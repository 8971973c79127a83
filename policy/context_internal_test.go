package policy

import (
	"fmt"
	"slices"
	"testing"

	"github.com/agentfsm/agentfsm/transcript"
	"pgregory.net/rapid"
)

// What the runtime context hands out (to a run, to a summarizer) never
// changes afterwards, whatever the engine does to the context next:
// adding messages, removing any of them, compacting; and appending to
// what was handed out never reaches the context (issue item 1).
func TestSharedContextNeverChanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := runtimeContext{seq: map[string]int{}}
		type handed struct {
			msgs []transcript.Message
			ids  []string
		}
		var out []handed
		n := 0
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 4).Draw(t, "op"); {
			case op == 0 || len(c.msgs) == 0:
				n++
				c.nextSeq++
				c.push(transcript.Message{ID: fmt.Sprint("m", n), Role: transcript.RoleUser, Content: transcript.TextContent(fmt.Sprint("text ", n))}, c.nextSeq)
			case op == 1:
				i := rapid.IntRange(0, len(c.msgs)-1).Draw(t, "remove")
				if !c.remove(c.msgs[i].ID) {
					t.Fatalf("%q not removed", c.msgs[i].ID)
				}
			case op == 2:
				n++
				c.nextSeq++
				c.compactionSeq = c.nextSeq
				kept := c.msgs[rapid.IntRange(0, len(c.msgs)-1).Draw(t, "kept")].ID
				c.compact(transcript.Entry{Type: transcript.EntryCompaction, ID: fmt.Sprint("c", n), Compaction: &transcript.Compaction{Summary: "s", FirstKeptEntryID: kept}}, -1)
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
			if c.est != EstimateTokens(c.msgs...) {
				t.Fatalf("the kept estimate is %d, the context's %d", c.est, EstimateTokens(c.msgs...))
			}
			for i, h := range out {
				for j, m := range h.msgs {
					if m.ID != h.ids[j] {
						t.Fatalf("handed-out slice %d changed at %d: %q, was %q", i, j, m.ID, h.ids[j])
					}
				}
			}
			for _, m := range c.msgs {
				if m.ID == "appended by the agent" {
					t.Fatal("an append to a handed-out slice reached the context")
				}
				if _, ok := c.seq[m.ID]; !ok {
					t.Fatalf("%q in the context has no position", m.ID)
				}
			}
			if len(c.seq) != len(c.msgs) {
				t.Fatalf("positions for %d IDs, %d messages: the engine keeps what left the context", len(c.seq), len(c.msgs))
			}
		}
	})
}

// Adding a message and removing the last one change the context in place,
// and a compaction copies only what it keeps (issue item 1).
func TestContextChangesCostWhatTheyChange(t *testing.T) {
	c := runtimeContext{seq: map[string]int{}}
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
