package policy

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/transcript"
)

// DigestSummarizer is the summarizer the library ships: deterministic, with
// no model. It lists what the cut messages did, one line each, keeping the
// start of every user message, the start of every assistant reply with the
// tools it called by name, each tool call's result in brief and each
// error, up to MaxLineChars characters a line. Images are counted, and
// thinking is left out. The lines of an earlier summary among the cut messages are
// carried over before them, as they were. The same messages always give
// the same summary.
//
// A digest is at most MaxChars characters long. To fit, it drops its
// oldest lines first (those carried over come before its own), and says
// after its first line how many lines it and the digests before it have
// dropped: "[12 earlier lines dropped]". Only when even its first lines
// do not fit is it cut short.
type DigestSummarizer struct {
	// MaxLineChars bounds one line of the digest; 0 means 200.
	MaxLineChars int
	// MaxChars bounds the whole digest, in characters as the token
	// estimate counts them (bytes of UTF-8); 0 means 20,000 characters
	// (about 5,000 tokens). A request's smaller MaxChars wins.
	MaxChars int
}

// Summarize implements Summarizer.
func (d DigestSummarizer) Summarize(ctx context.Context, req SummaryRequest) (Summary, error) {
	if err := ctx.Err(); err != nil {
		return Summary{}, context.Cause(ctx)
	}
	limit := d.MaxLineChars
	if limit <= 0 {
		limit = 200
	}
	maxChars := d.MaxChars
	if maxChars <= 0 {
		maxChars = sizes.DigestChars
	}
	if req.MaxChars > 0 {
		maxChars = min(maxChars, req.MaxChars)
	}
	counts := map[transcript.Role]int{}
	for _, m := range req.Messages {
		counts[m.Role]++
	}
	head := []string{fmt.Sprintf("Summary of %d earlier messages (%d from the user, %d from the assistant, %d tool results).",
		len(req.Messages), counts[transcript.RoleUser], counts[transcript.RoleAssistant], counts[transcript.RoleToolResult])}
	if req.Instructions != "" {
		head = append(head, "Focus: "+clip(req.Instructions, limit))
	}
	var body []string
	dropped := 0
	for _, m := range req.Messages {
		switch {
		case m.Role == transcript.RoleSummary:
			lines, n := carriedLines(m.Text())
			body = append(body, lines...)
			dropped += n
		case m.Role == transcript.RoleUser:
			body = append(body, "- user: "+clip(m.Text()+images(m), limit))
		case m.Role == transcript.RoleToolResult:
			body = append(body, "- "+toolResultLine(m, limit))
		case m.IsError():
			body = append(body, "- error: "+clip(m.ErrorMessage, limit))
		default:
			text := m.Text()
			for _, c := range m.ToolCalls() {
				text += " [called " + c.Name + "]"
			}
			body = append(body, fmt.Sprintf("- assistant (%s): %s", m.StopReason, clip(text+images(m), limit)))
		}
	}
	return Summary{Text: fitDigest(head, body, dropped, maxChars)}, nil
}

// toolResultLine is a tool result's line: the tool's name, whether it
// failed, and the start of its text.
func toolResultLine(m transcript.Message, limit int) string {
	head := "tool result"
	if m.ToolName != "" {
		head += " (" + m.ToolName + ")"
	}
	if m.ToolError {
		head += " failed"
	}
	return head + ": " + clip(m.Text()+images(m), limit)
}

// images notes the images of m, if it has any.
func images(m transcript.Message) string {
	n := 0
	for _, b := range m.Content {
		if b.Type == transcript.BlockImage {
			n++
		}
	}
	switch n {
	case 0:
		return ""
	case 1:
		return " [1 image]"
	}
	return " [" + strconv.Itoa(n) + " images]"
}

// carriedLines returns the lines of an earlier summary to carry over, and
// how many lines the digests before it dropped. A digest's own first lines
// (its counts, its focus, its note of dropped lines) are not carried over.
func carriedLines(summary string) (lines []string, dropped int) {
	digest := false
	for i, line := range strings.Split(strings.TrimSpace(summary), "\n") {
		line = strings.TrimRight(line, " \t\r")
		if line == "" {
			continue
		}
		if i == 0 && strings.HasPrefix(line, "Summary of ") {
			digest = true
			continue
		}
		if digest && len(lines) == 0 {
			if strings.HasPrefix(line, "Focus: ") {
				continue
			}
			if n, ok := droppedNote(line); ok {
				dropped += n
				continue
			}
		}
		lines = append(lines, line)
	}
	return lines, dropped
}

// droppedNote reads a digest's note of dropped lines.
func droppedNote(line string) (int, bool) {
	rest, ok := strings.CutPrefix(line, "[")
	if !ok {
		return 0, false
	}
	num, ok := strings.CutSuffix(rest, " earlier lines dropped]")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	return n, err == nil && n >= 0
}

// fitDigest joins head, a note of the dropped lines when there are any,
// and body, dropping the oldest lines of body until it fits in maxChars;
// when even head does not fit, it cuts the text short.
func fitDigest(head, body []string, dropped, maxChars int) string {
	size := len(strings.Join(head, "\n"))
	for _, line := range body {
		size += 1 + len(line)
	}
	note := func() string { return "[" + strconv.Itoa(dropped) + " earlier lines dropped]" }
	first := 0
	for first < len(body) {
		total := size
		if dropped > 0 {
			total += 1 + len(note())
		}
		if total <= maxChars {
			break
		}
		size -= 1 + len(body[first])
		first++
		dropped++
	}
	lines := head
	if dropped > 0 {
		lines = append(lines, note())
	}
	return cutChars(strings.Join(append(lines, body[first:]...), "\n"), maxChars)
}

// cutChars cuts s to at most n bytes, on a rune boundary.
func cutChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// capSummary cuts a summary longer than maxChars bytes to its end, after a
// first line that says so; the end of a summary is usually its most recent
// part.
func capSummary(summary string, maxChars int) string {
	if len(summary) <= maxChars {
		return summary
	}
	const note = "[the start of this summary was cut]\n"
	keep := maxChars - len(note)
	if keep <= 0 {
		return cutChars(summary, maxChars)
	}
	tail := summary[len(summary)-keep:]
	for tail != "" && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return note + tail
}

// clip returns s on one line, cut to at most n runes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
