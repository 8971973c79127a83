package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// AgentSummarizer is a Summarizer that asks the model: it runs Agent once
// (either provider adapter, or any Agent) with one user message, a
// summarization prompt, and takes the text of the run's last assistant
// message as the summary.
//
// The run asks the request's model with the request's credential: the
// session's model and the credential its runs use when the compaction
// starts, so a summary follows a usage-limit switch to another key. Model
// and Credential, when set, stand in for them (see their docs).
//
// The prompt holds the cut messages as a transcript between
// <conversation> tags: the user's and the assistant's text, each tool call
// by name with its arguments, each tool result, errors and images noted,
// thinking left out. A long message, tool result or tool call's arguments
// is truncated, its start kept, with a visible marker
// ("[... N more characters truncated]"), as the reference agent does. The
// transcript of one request is bounded by TranscriptChars, so the request
// fits the model's context window. A transcript over the bound is
// summarized in pieces, oldest first, one run each: each piece within the
// bound less the summary so far, and each run's summary (cut to at most
// half the bound, and no less than 1,000 characters) given to the next as
// the summary so far, so no request is over the bound whatever the size of
// the cut. At most MaxPieces runs: past that the oldest messages are
// dropped, with a marker that counts them. An earlier summary among the
// cut messages (role compactionSummary) is always given whole to the first
// run, as the summary so far, to be updated rather than repeated; the
// caller's instructions, when given, to every run, as what to focus on. The model is asked for a structured summary (the goal,
// constraints, progress, decisions, next steps, the files that matter) of
// at most the request's MaxChars characters, and no more than a quarter of
// the context window of the model asked (its window in tokens, as
// characters).
//
// The files the cut tool calls read and modified (a call whose arguments
// name a path: "path", "file_path", "filePath", "file" or "filename"; it
// modified the file when its tool's name says so, such as write, edit,
// create, patch, replace, delete, move or rename, else it read it) are
// appended to the summary as <read-files> and <modified-files> lists, so
// later summaries carry them on, and are the Summary's Details
// (SummaryDetails).
//
// Every run gets ctx, so AbortCompaction and Abort cancel the run in
// flight, and no run starts after. A run that fails on a transient error
// (the class Retryable under the request's Retry.Rules: 529 overloaded,
// 503, a network failure) is retried within the request's Retry, the
// session's retry settings, as a retry chain retries a run: as Retry.Next
// says, on a timer ctx's end stops at once. Summarize fails, and the compaction with it, when a run cannot
// start, returns an error, ends in an error or aborted message (past its
// retries, naming them, for a transient one), or gives no text. A summary
// longer than the bound is cut (its start kept), with the file lists
// always within the bound.
//
// An agent with tools may call them while it summarizes; give the
// summarizer an agent without tools (a second adapter with the same
// model) to avoid it.
type AgentSummarizer struct {
	// Agent is the model to ask; required.
	Agent Agent
	// Model, when its ID is set, is the model asked in place of the
	// request's (the session's), such as a cheaper one for summaries.
	Model policy.Model
	// Credential is put in the RunRequest when the request carries none
	// for the provider of the model asked (a session without a credential
	// store, or a Model of another provider); nil then lets the agent use
	// its default (the adapters resolve the provider's usual variable).
	Credential *policy.Credential
	// SessionID is put in the RunRequest.
	SessionID string
	// MaxChars bounds the summary when the request gives no bound (its
	// MaxChars is 0: the model's context window is unknown); 0 means
	// 20,000 characters (about 5,000 tokens), policy.DigestSummarizer's default.
	// The request's bound wins when it has one.
	MaxChars int
	// TranscriptChars bounds the prompt's transcript and previous summary,
	// in characters as the token estimate counts them (bytes of UTF-8);
	// 0 means derived from the context window of the model asked: half
	// of it, at 4 characters a token divided by the request's TokenRatio
	// when that is over 1, less the summary's bound (so the
	// prompt, the instructions and the answer fit with room to spare), or
	// 200,000 characters (about 50,000 tokens, which fits the windows of
	// the models in common use) when the window is unknown.
	TranscriptChars int
	// MaxPieces bounds the model calls of one summary (see Summarize); 0
	// means 8.
	MaxPieces int
}

// defaultTranscriptChars bounds an AgentSummarizer's transcript when the
// model's context window is unknown (see TranscriptChars).
const defaultTranscriptChars = 200_000

// minTranscriptChars is the smallest transcript budget a context window
// is given, however small the window.
const minTranscriptChars = 2000

// SummaryDetails is what an AgentSummarizer puts in Summary.Details: the
// files the summarized tool calls, and the summaries before, read and
// modified, sorted, each once. A file both read and modified is listed as
// modified.
type SummaryDetails struct {
	ReadFiles     []string `json:"readFiles,omitempty"`
	ModifiedFiles []string `json:"modifiedFiles,omitempty"`
}

// The bounds of the transcript's parts, in characters (bytes), past which
// they are truncated with a marker: a tool result's as the reference
// agent's, a user or assistant message's longer.
const (
	summaryArgsChars    = 500
	summaryResultChars  = 2000
	summaryMessageChars = 8000
)

// defaultSummaryPieces bounds the model calls of one summary when
// MaxPieces is 0.
const defaultSummaryPieces = 8

// maxPieces is MaxPieces, or defaultSummaryPieces when it is not positive.
func (a AgentSummarizer) maxPieces() int {
	if a.MaxPieces > 0 {
		return a.MaxPieces
	}
	return defaultSummaryPieces
}

// ask runs the agent once on prompt and returns the text of its last
// assistant message, trimmed; on a failure, also the failure as the
// classifier reads it (the run's error, or its last message's) under
// rules, and whether it is one (failed false for a cancelled context or
// an answer without text, which no retry mends).
func (a AgentSummarizer) ask(ctx context.Context, model policy.Model, cred *policy.Credential, prompt transcript.Message, rules classify.Rules) (text string, failure classify.Result, failed bool, err error) {
	if err := ctx.Err(); err != nil {
		return "", failure, false, context.Cause(ctx)
	}
	// The agent may emit from its own goroutines.
	var mu sync.Mutex
	var last *transcript.Message
	emit := func(ev events.Event) {
		if e, ok := ev.(events.MessageEnd); ok && e.Message.Role == transcript.RoleAssistant {
			m := e.Message
			mu.Lock()
			last = &m
			mu.Unlock()
		}
	}
	runErr := a.Agent.Run(ctx, RunRequest{SessionID: a.SessionID, Context: []transcript.Message{prompt}, Model: model, Credential: cred}, emit)
	mu.Lock()
	defer mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return "", failure, false, context.Cause(ctx)
	case runErr != nil:
		failure = rules.Classify(classify.Message{StopReason: transcript.StopReasonError, ErrorMessage: runErr.Error(), Err: runErr, ContextWindow: model.ContextWindow}, time.Now())
		return "", failure, true, fmt.Errorf("session: the summary's model run failed: %w", runErr)
	case last == nil:
		return "", failure, false, errors.New("session: the summary's model run gave no answer")
	case last.IsError() || last.StopReason == transcript.StopReasonAborted:
		msg := last.ErrorMessage
		if msg == "" {
			msg = string(last.StopReason)
		}
		cm := classify.Message{StopReason: last.StopReason, ErrorMessage: last.ErrorMessage, Status: last.HTTPStatus, ErrorType: last.ErrorType,
			Headers: last.Headers, Err: last.Err, ContextWindow: model.ContextWindow}
		if last.Usage != nil {
			cm.Usage = *last.Usage
		}
		return "", rules.Classify(cm, time.Now()), last.IsError(), fmt.Errorf("session: the summary's model call failed: %s", msg)
	}
	text = strings.TrimSpace(last.Text())
	if text == "" {
		return "", failure, false, errors.New("session: the summary's model answered no text")
	}
	return text, failure, false, nil
}

// askRetrying is ask, with a call that fails retried as retry.Next says
// (the transition table's decision on a run that failed so: a transient
// error within the retry settings' count, time budget and delay cap),
// waiting on a timer that ctx's end (AbortCompaction, Abort) stops at
// once. The last error fails the summary, with the retries made.
func (a AgentSummarizer) askRetrying(ctx context.Context, retry policy.RetryConfig, model policy.Model, cred *policy.Credential, prompt transcript.Message) (string, error) {
	var first time.Time // the first failure: the time budget counts from it
	for n := 1; ; n++ {
		text, failure, failed, err := a.ask(ctx, model, cred, prompt, retry.Rules)
		if err == nil {
			return text, nil
		}
		if n == 1 {
			first = time.Now()
		}
		delay, again := retry.Next(n, time.Since(first), failure)
		if !failed || !again {
			if n > 1 {
				err = fmt.Errorf("%w (after %d %s)", err, n-1, plural(n-1, "retry", "retries"))
			}
			return "", err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", context.Cause(ctx)
		case <-t.C:
		}
	}
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Summarize implements Summarizer.
func (a AgentSummarizer) Summarize(ctx context.Context, req policy.SummaryRequest) (policy.Summary, error) {
	if a.Agent == nil {
		return policy.Summary{}, errors.New("session: AgentSummarizer has no Agent")
	}
	if err := ctx.Err(); err != nil {
		return policy.Summary{}, context.Cause(ctx)
	}
	maxChars := req.MaxChars
	if maxChars <= 0 {
		maxChars = a.MaxChars
		if maxChars <= 0 {
			maxChars = sizes.DigestChars
		}
	}
	model, cred := a.target(req)
	if model.ContextWindow > 0 {
		// The answer too must fit the window of the model asked: a
		// quarter of it, at 4 characters a token.
		maxChars = min(maxChars, max(model.ContextWindow, minPieceChars))
	}
	details := fileOps(req.Messages)
	files := details.format()
	if len(files) > maxChars/2 {
		details = details.trim(maxChars / 2)
		files = details.format()
	}
	budget := a.transcriptBudget(model, maxChars, req.TokenRatio)
	var previous, entries []string
	for _, m := range req.Messages {
		if m.Role == transcript.RoleSummary {
			previous = append(previous, stripFileLists(m.Text()))
		} else if e := transcriptEntry(m); e != "" {
			entries = append(entries, closingTags.Replace(e))
		}
	}
	prev := closingTags.Replace(strings.Join(previous, "\n\n"))
	bound := max(maxChars-len(files), 0)
	// A fold between pieces is the summary so far: bounded so that it
	// leaves at least half the budget to the next piece, yet never cut to
	// nothing by a tiny budget.
	fold := min(bound, max(budget/2, minPieceChars))
	pieces, omitted := splitTranscript(entries, budget-len(prev), budget-fold, a.maxPieces())
	var text string
	for i, piece := range pieces {
		if i > 0 {
			prev = closingTags.Replace(text)
		}
		limit := bound
		if i < len(pieces)-1 {
			limit = fold
		}
		var body string
		if i == 0 && omitted > 0 {
			body = fmt.Sprintf("[... %d earlier messages omitted to fit the summary request]\n", omitted)
		}
		body += strings.Join(piece, "")
		prompt := transcript.Message{Role: transcript.RoleUser, Content: transcript.TextContent(summaryPrompt(body, prev, prev != "", req.Instructions, limit))}
		answer, err := a.askRetrying(ctx, req.Retry, model, cred, prompt)
		if err != nil {
			return policy.Summary{}, err
		}
		text = cutSummary(answer, limit)
	}
	var out any
	if len(details.ReadFiles)+len(details.ModifiedFiles) > 0 {
		out = details
	}
	return policy.Summary{Text: text + files, Details: out}, nil
}

// target is the model to ask and the credential to ask it with: Model
// when set, else the request's; the request's credential when it is for
// that model's provider, else Credential.
func (a AgentSummarizer) target(req policy.SummaryRequest) (policy.Model, *policy.Credential) {
	model := req.Model
	if a.Model.ID != "" {
		model = a.Model
	}
	if c := req.Credential; c != nil && (c.Provider == model.Provider || model.Provider == "") {
		cred := *c
		return model, &cred
	}
	return model, a.Credential
}

// transcriptBudget is the most characters the prompt's transcript and
// previous summary may take (see TranscriptChars); ratio is the session's
// token ratio (SummaryRequest.TokenRatio).
func (a AgentSummarizer) transcriptBudget(model policy.Model, maxChars int, ratio float64) int {
	if a.TranscriptChars > 0 {
		return a.TranscriptChars
	}
	if model.ContextWindow <= 0 {
		return defaultTranscriptChars
	}
	// Half the window in characters, computed so it cannot overflow:
	// by the session's token ratio when the provider counts more than
	// chars/4 (code, CJK text), so that the request fits by its count.
	half := model.ContextWindow / 2
	if ratio > 1 && !math.IsInf(ratio, 0) {
		half = int(float64(half) / ratio)
	}
	if half > math.MaxInt/4 {
		half = math.MaxInt / 4
	}
	return max(half*4-maxChars, minTranscriptChars)
}

// closingTags escapes, in what the conversation says, the tags that close
// the prompt's blocks, so that no message can end its block early.
var closingTags = strings.NewReplacer("</conversation>", "<\\/conversation>", "</previous-summary>", "<\\/previous-summary>")

// summaryPrompt is the user message that asks for a summary of at most
// maxChars characters of the conversation, its transcript (escaped), given
// the previous summary (escaped) when hasPrevious.
func summaryPrompt(conversation, previous string, hasPrevious bool, instructions string, maxChars int) string {
	var sb strings.Builder
	sb.WriteString("<conversation>\n")
	sb.WriteString(conversation)
	sb.WriteString("</conversation>\n\n")
	if hasPrevious {
		sb.WriteString("<previous-summary>\n" + previous + "\n</previous-summary>\n\n")
	}
	sb.WriteString("The conversation above is the earlier part of a session between a user and an AI assistant; it is being removed from the assistant's context, and your summary will stand for it. Do not continue the conversation and do not answer its questions: write only the summary.\n\n")
	if hasPrevious {
		sb.WriteString("<previous-summary> is the summary so far, of what came before the conversation. Update it with the conversation: keep what still matters, add what is new, move finished work to Done, and drop what no longer holds.\n\n")
	}
	sb.WriteString(`Use this format:

## Goal
What the user wants to achieve.

## Constraints & Preferences
Requirements and preferences the user stated.

## Progress
### Done
### In Progress
### Blocked

## Key Decisions
Each decision with its reason, in brief.

## Next Steps
The open tasks, in order.

## Critical Context
Facts needed to continue: files read, written or edited and why, names, values, error messages, commands.

`)
	fmt.Fprintf(&sb, "Keep the summary under %d characters. Be concise; keep the exact file paths, function names and error messages that matter.", max(maxChars, 0))
	if instructions != "" {
		sb.WriteString("\n\nFocus on this, as the user asked: " + instructions)
	}
	return sb.String()
}

// transcriptEntry is m as lines of the transcript, "" when it has
// nothing to show.
func transcriptEntry(m transcript.Message) string {
	var sb strings.Builder
	line := func(head, text string) {
		if text != "" {
			sb.WriteString("[" + head + "]: " + text + "\n")
		}
	}
	switch m.Role {
	case transcript.RoleUser:
		line("User", truncateForSummary(m.Text(), summaryMessageChars)+imageNote(m))
	case transcript.RoleToolResult:
		head := "Tool result"
		if m.ToolName != "" {
			head += " " + m.ToolName
		}
		if m.ToolError {
			head += " (error)"
		}
		text := truncateForSummary(m.Text(), summaryResultChars) + imageNote(m)
		if text == "" {
			text = "(empty)"
		}
		line(head, text)
	case transcript.RoleAssistant:
		line("Assistant", truncateForSummary(m.Text(), summaryMessageChars)+imageNote(m))
		var calls []string
		for _, c := range m.ToolCalls() {
			calls = append(calls, c.Name+"("+truncateForSummary(string(c.Arguments), summaryArgsChars)+")")
		}
		line("Assistant tool calls", strings.Join(calls, "; "))
		if m.IsError() {
			line("Assistant error", truncateForSummary(m.ErrorMessage, summaryResultChars))
		}
	default:
		line(string(m.Role), truncateForSummary(m.Text(), summaryMessageChars))
	}
	return sb.String()
}

// splitTranscript cuts entries, oldest first, into pieces for one model
// call each: the first piece within first characters (what the previous
// summary leaves of the budget), each later one within rest (what the
// summary so far leaves). An entry over its piece's room alone is
// truncated to it, its start kept, with a marker; a room is at least
// minPieceChars. When more than maxPieces pieces would be needed, the
// fewest oldest entries are dropped for maxPieces to do, and omitted
// counts them.
// There is always one piece at least, empty when entries is.
func splitTranscript(entries []string, first, rest, maxPieces int) (pieces [][]string, omitted int) {
	first, rest = max(first, minPieceChars), max(rest, minPieceChars)
	split := func(entries []string) [][]string {
		var out [][]string
		var piece []string
		room, used := first, 0
		for _, e := range entries {
			if len(piece) > 0 && used+len(e) > room {
				out = append(out, piece)
				piece, room, used = nil, rest, 0
			}
			if len(e) > room {
				e = truncateForSummary(e, room-truncationMarkerChars) + "\n"
			}
			piece = append(piece, e)
			used += len(e)
		}
		return append(out, piece)
	}
	pieces = split(entries)
	if len(pieces) > maxPieces {
		// The fewest oldest entries to drop so that maxPieces pieces hold
		// the rest: dropping every entry leaves one (empty) piece.
		omitted = sort.Search(len(entries), func(d int) bool { return len(split(entries[d:])) <= maxPieces })
		pieces = split(entries[omitted:])
	}
	return pieces, omitted
}

// minPieceChars is the least room a piece of the transcript is given;
// truncationMarkerChars is room enough for truncateForSummary's marker.
const (
	minPieceChars         = 1000
	truncationMarkerChars = 48
)

// truncateForSummary keeps the start of s, at most n bytes on a rune
// boundary, and marks what it cut: "[... N more characters truncated]".
func truncateForSummary(s string, n int) string {
	if len(s) <= n {
		return s
	}
	kept := cutSummary(s, n)
	return kept + fmt.Sprintf("\n\n[... %d more characters truncated]", utf8.RuneCountInString(s[len(kept):]))
}

// imageNote notes the images of m.
func imageNote(m transcript.Message) string {
	n := 0
	for _, b := range m.Content {
		if b.Type == transcript.BlockImage {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return " [" + strconv.Itoa(n) + " image(s)]"
}

// cutSummary cuts s to at most n bytes, on a rune boundary, keeping its
// start (the goal and the progress come first).
func cutSummary(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// The keys of tool call arguments that name a file, and the words of tool
// names that modify one.
var (
	pathKeys    = []string{"path", "file_path", "filePath", "file", "filename"}
	modifyWords = []string{"write", "edit", "create", "patch", "replace", "delete", "remove", "move", "rename", "insert"}
)

// fileOps collects the files the tool calls of msgs read and modified,
// with those the earlier summaries among them list.
func fileOps(msgs []transcript.Message) SummaryDetails {
	read, modified := map[string]bool{}, map[string]bool{}
	for _, m := range msgs {
		if m.Role == transcript.RoleSummary {
			r, w := parseFileLists(m.Text())
			for _, p := range r {
				read[p] = true
			}
			for _, p := range w {
				modified[p] = true
			}
			continue
		}
		for _, c := range m.ToolCalls() {
			p := callPath(c.Arguments)
			if p == "" {
				continue
			}
			if modifies(c.Name) {
				modified[p] = true
			} else {
				read[p] = true
			}
		}
	}
	var d SummaryDetails
	for p := range modified {
		d.ModifiedFiles = append(d.ModifiedFiles, p)
	}
	for p := range read {
		if !modified[p] {
			d.ReadFiles = append(d.ReadFiles, p)
		}
	}
	sort.Strings(d.ReadFiles)
	sort.Strings(d.ModifiedFiles)
	return d
}

// callPath is the path a tool call's arguments name, or "".
func callPath(args json.RawMessage) string {
	var obj map[string]any
	if json.Unmarshal(args, &obj) != nil {
		return ""
	}
	for _, k := range pathKeys {
		if s, ok := obj[k].(string); ok && strings.TrimSpace(s) != "" && !strings.ContainsAny(s, "\n<>") {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// modifies reports whether a tool of this name modifies the file it names.
func modifies(name string) bool {
	name = strings.ToLower(name)
	return slices.ContainsFunc(modifyWords, func(w string) bool { return strings.Contains(name, w) })
}

// format is the file lists as appended to a summary ("" when empty).
func (d SummaryDetails) format() string {
	var sb strings.Builder
	if len(d.ReadFiles) > 0 {
		sb.WriteString("\n\n<read-files>\n" + strings.Join(d.ReadFiles, "\n") + "\n</read-files>")
	}
	if len(d.ModifiedFiles) > 0 {
		sb.WriteString("\n\n<modified-files>\n" + strings.Join(d.ModifiedFiles, "\n") + "\n</modified-files>")
	}
	return sb.String()
}

// trim drops files, read ones first, until the lists take at most n
// characters.
func (d SummaryDetails) trim(n int) SummaryDetails {
	for len(d.format()) > n && len(d.ReadFiles) > 0 {
		d.ReadFiles = d.ReadFiles[1:]
	}
	for len(d.format()) > n && len(d.ModifiedFiles) > 0 {
		d.ModifiedFiles = d.ModifiedFiles[1:]
	}
	return d
}

// parseFileLists reads the file lists an AgentSummarizer appended to a
// summary.
func parseFileLists(summary string) (read, modified []string) {
	return tagLines(summary, "read-files"), tagLines(summary, "modified-files")
}

// tagLines are the non-empty lines between <tag> and </tag> in s.
func tagLines(s, tag string) []string {
	_, rest, ok := strings.Cut(s, "<"+tag+">\n")
	if !ok {
		return nil
	}
	body, _, ok := strings.Cut(rest, "</"+tag+">")
	if !ok {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// stripFileLists is a summary without the file lists an AgentSummarizer
// appended (they are folded into the new summary's lists).
func stripFileLists(s string) string {
	for _, tag := range []string{"read-files", "modified-files"} {
		start := strings.Index(s, "<"+tag+">")
		end := strings.Index(s, "</"+tag+">")
		if start >= 0 && end > start {
			s = s[:start] + s[end+len("</"+tag+">"):]
		}
	}
	return strings.TrimSpace(s)
}
