package temporal

import (
	"strconv"
	"strings"

	"github.com/agentfsm/agentfsm/transcript"
)

// shorten returns a history that rebuilds the engine the whole history
// rebuilt, runtime context ctx and all, with only the entries that
// context needs: the messages it keeps from before the latest compaction,
// that compaction, the messages it holds from after it. A kept message
// stays before the compaction, as in the history, so that what the
// policy reads from positions (a message older than the latest
// compaction) reads the same. A removal entry first names the
// highest-numbered ID dropped, so that new IDs count on from it (a removal
// of a message the context does not hold changes nothing else).
func shorten(history []transcript.Entry, ctx []transcript.Message) []transcript.Entry {
	k := -1
	for i, e := range history {
		if e.Type == transcript.EntryCompaction {
			k = i
		}
	}
	inContext := map[string]bool{}
	for _, m := range ctx {
		inContext[m.ID] = true
	}
	after := map[string]bool{}
	for _, e := range history[k+1:] {
		if e.Type == transcript.EntryMessage && inContext[e.ID] {
			after[e.ID] = true
		}
	}
	var out []transcript.Entry
	top, topN := "", -1
	for _, e := range history {
		if n, ok := idNumber(e.ID); ok && n > topN && !inContext[e.ID] {
			top, topN = e.ID, n
		}
	}
	if top != "" {
		out = append(out, transcript.Entry{Type: transcript.EntryRemoval, ID: top})
	}
	for i, m := range ctx {
		if k >= 0 && i == 0 || after[m.ID] {
			continue // the summary, or a message after the compaction
		}
		out = append(out, transcript.Entry{Type: transcript.EntryMessage, ID: m.ID, Timestamp: m.Timestamp, Message: &ctx[i]})
	}
	if k >= 0 {
		out = append(out, history[k])
	}
	for _, e := range history[k+1:] {
		if after[e.ID] && e.Type == transcript.EntryMessage {
			out = append(out, e)
		}
	}
	return out
}

// idNumber is the number that ends an ID after its last dash, as the
// engine numbers the IDs it makes.
func idNumber(id string) (int, bool) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	return n, err == nil && n >= 0
}
