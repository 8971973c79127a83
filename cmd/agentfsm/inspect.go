package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentfsm/agentfsm/internal/lines"
	"github.com/agentfsm/agentfsm/transcript"
)

// maxInspectLine is the longest history line inspect reads; a longer one
// is reported and passed over.
var maxInspectLine = 256 << 20

// maxInspectWarnings is how many bad lines inspect names one by one; the
// rest are counted.
const maxInspectWarnings = 10

func runInspect(args []string, env *environment) int {
	fs := newFlagSet("inspect", "agentfsm inspect [--format text|mermaid|json] HISTORY")
	format := fs.String("format", "text", "output `format`: text (aligned columns), mermaid (a timeline to paste into an issue) or json")
	if code := fs.parseArgs(args, env); code >= 0 {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(env.stderr, "agentfsm inspect: "+format+"\n", a...)
		return code
	}
	switch {
	case fs.NArg() == 0:
		return fail(2, "which history file? (agentfsm inspect HISTORY; run agentfsm inspect -h for usage)")
	case fs.NArg() > 1:
		return fail(2, "one history file at a time, not %d (run agentfsm inspect -h for usage)", fs.NArg())
	}
	var render func(io.Writer, string, *story) error
	switch *format {
	case "text":
		render = renderText
	case "mermaid":
		render = renderMermaid
	case "json":
		render = renderJSON
	default:
		return fail(2, "unknown --format %q (want text, mermaid or json)", *format)
	}
	path := fs.Arg(0)
	st, bad, err := readStory(path, env.stderr)
	if err != nil {
		return fail(1, "%s", terminalSafe(err.Error(), false))
	}
	if err := render(env.stdout, path, st); err != nil {
		return fail(1, "writing the story: %v", err)
	}
	if bad {
		return 1
	}
	return 0
}

// readStory reads the history file at path as a stream and builds its
// story. A line that is not an entry is reported on warn (by the file's
// name and the line's number) and passed over, and makes bad true; a last
// line cut short (a write a crash interrupted, which the session drops
// when it reopens the file) is reported and is not bad. err is a file
// that cannot be read at all.
func readStory(path string, warn io.Writer) (st *story, bad bool, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, false, fmt.Errorf("reading history: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, false, fmt.Errorf("%s is not a history file: it is a %s", path, fileKind(fi.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false, fmt.Errorf("reading history: %w", err)
	}
	defer f.Close()
	endsInNewline := true
	if fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err != nil {
			return nil, false, fmt.Errorf("reading history %s: %w", path, err)
		}
		endsInNewline = last[0] == '\n'
	}
	b := newStoryBuilder()
	lr := lines.NewReader(f, maxInspectLine)
	warnings := 0
	report := func(n int, format string, a ...any) {
		warnings++
		if warnings <= maxInspectWarnings {
			fmt.Fprintf(warn, "agentfsm inspect: %s:%d: %s\n", terminalSafe(path, false), n, terminalSafe(fmt.Sprintf(format, a...), false))
		}
	}
	// pending is the error of the line before, reported once the next is
	// read, which tells whether it was the last; lastLine is that line
	// (Next reuses its slice), to tell a line cut short (not a JSON value)
	// from a complete one of another kind.
	var pending error
	var lastLine []byte
	pendingLine := 0
	for n := 1; ; n++ {
		line, err := lr.Next()
		if pending != nil {
			if errors.Is(err, io.EOF) && !endsInNewline && !json.Valid(lastLine) {
				fmt.Fprintf(warn, "agentfsm inspect: %s:%d: the last line is cut short (a write interrupted by a crash; a session reopening the file drops it); the story stops before it\n", terminalSafe(path, false), pendingLine)
			} else {
				report(pendingLine, "%v; the line is passed over", pending)
				bad = true
			}
			pending = nil
		}
		switch {
		case errors.Is(err, io.EOF):
			if warnings > maxInspectWarnings {
				fmt.Fprintf(warn, "agentfsm inspect: %s: %d more lines are not entries\n", terminalSafe(path, false), warnings-maxInspectWarnings)
			}
			return b.finish(), bad, nil
		case errors.Is(err, lines.ErrTooLong):
			report(n, "a line longer than %d MiB; the line is passed over", maxInspectLine>>20)
			bad = true
			continue
		case err != nil:
			return nil, false, fmt.Errorf("reading history %s at line %d: %w", path, n, err)
		}
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var e transcript.Entry
		if err := json.Unmarshal(line, &e); err != nil {
			pending, pendingLine = inspectLineError(err), n
			lastLine = append(lastLine[:0], line...)
			continue
		}
		if err := e.Validate(); err != nil {
			pending, pendingLine = fmt.Errorf("not a history entry: %v", err), n
			lastLine = append(lastLine[:0], line...)
			continue
		}
		b.add(e, n)
	}
}

func inspectLineError(err error) error {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Errorf("not JSON: %v", err)
	}
	return fmt.Errorf("not a history entry: %v", strings.TrimPrefix(err.Error(), "json: "))
}

func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "file of mode " + m.String()
}

// summaryLine is the story's first line: what was read.
func summaryLine(path string, st *story) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s, %s", path, plural(st.Entries, "entry", "entries"), plural(countTurns(st), "turn", "turns"))
	if st.First != 0 {
		first := time.UnixMilli(st.First).UTC()
		fmt.Fprintf(&b, ", %s to %s UTC", first.Format("2006-01-02 15:04:05"), time.UnixMilli(st.Last).UTC().Format("15:04:05"))
	}
	return b.String()
}

func countTurns(st *story) int {
	n := 0
	for _, t := range st.Turns {
		if t.N > 0 {
			n++
		}
	}
	return n
}

// noRecoveryNote says what a history without recovery entries cannot tell.
const noRecoveryNote = "written without recovery entries (a version before them, or a session without session.WithRecoveryHistory): retry delays, error classes, credential switches and limits were not recorded; what follows is what the messages, removals and compactions show"

func renderText(w io.Writer, path string, st *story) error {
	fmt.Fprintln(w, terminalSafe(summaryLine(path, st), false))
	if st.Entries > 0 && st.Recovery == 0 {
		fmt.Fprintln(w, noRecoveryNote)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range st.Turns {
		fmt.Fprintln(tw)
		head := "before the first prompt"
		if t.N > 0 {
			head = fmt.Sprintf("turn %d\t%s\tline %d\t%q", t.N, clock(t.At), t.Line, t.Prompt)
		}
		if t.Failed {
			head += "\t(failed)"
		}
		fmt.Fprintln(tw, head)
		for _, s := range t.Steps {
			fmt.Fprintf(tw, "  %s\t%s\tline %d\t%s\n", sinceTurn(t, s), s.What, s.Line, s.Detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// sinceTurn is the step's time from the turn's start ("+1.204s"), or its
// time of day in turn 0.
func sinceTurn(t *storyTurn, s storyEvent) string {
	if t.N == 0 || t.At == 0 {
		return clock(s.At)
	}
	d := time.Duration(s.At-t.At) * time.Millisecond
	return "+" + strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
}

func renderMermaid(w io.Writer, path string, st *story) error {
	var b strings.Builder
	b.WriteString("timeline\n")
	fmt.Fprintf(&b, "    title %s\n", mermaidText(summaryLine(path, st)))
	if st.Entries > 0 && st.Recovery == 0 {
		fmt.Fprintf(&b, "    section %s\n", mermaidText("history without recovery entries"))
	}
	for _, t := range st.Turns {
		head := "before the first prompt"
		if t.N > 0 {
			head = fmt.Sprintf("turn %d: %s", t.N, excerpt(t.Prompt, 40))
		}
		if t.Failed {
			head += " (failed)"
		}
		fmt.Fprintf(&b, "    section %s\n", mermaidText(head))
		for _, s := range t.Steps {
			fmt.Fprintf(&b, "        %s : %s\n", mermaidText(sinceTurn(t, s)), mermaidText(s.What+" "+excerpt(s.Detail, 120)))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mermaidText is s as the text of a Mermaid timeline: one line, and the
// characters its syntax reads (":" separates a period from its events,
// "#" and ";" start entities, "<" and ">" tags) written as Mermaid's
// entity codes, which show as the characters themselves.
func mermaidText(s string) string {
	s = oneLine(s)
	var b strings.Builder
	for _, r := range s {
		switch r {
		case ':', '#', ';', '<', '>', '"', '`', '{', '}', '%':
			b.WriteString("#" + strconv.Itoa(int(r)) + ";")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func renderJSON(w io.Writer, path string, st *story) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		File string `json:"file"`
		*story
	}{path, st})
}
