package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/lines"
	"github.com/agentfsm/agentfsm/internal/wiretext"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// maxLine is the longest command line Serve reads (64 MiB); a longer one
// gets a parse failure and the lines after it are read as usual.
const maxLine = 64 << 20

// response is one reply line.
type response struct {
	ID      json.RawMessage `json:"id,omitempty"`
	Type    string          `json:"type"`
	Command string          `json:"command"`
	Success bool            `json:"success"`
	Data    any             `json:"data,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// State is the data of a get_state response.
type State struct {
	SessionID             string       `json:"sessionId"`
	Model                 policy.Model `json:"model"`
	IsStreaming           bool         `json:"isStreaming"`
	IsCompacting          bool         `json:"isCompacting"`
	IsRetrying            bool         `json:"isRetrying"`
	RetryAttempt          int          `json:"retryAttempt"`
	AutoRetryEnabled      bool         `json:"autoRetryEnabled"`
	AutoCompactionEnabled bool         `json:"autoCompactionEnabled"`
	MessageCount          int          `json:"messageCount"`
	PendingMessageCount   int          `json:"pendingMessageCount"`
	State                 string       `json:"state"`
	// LastCompaction is the size of the latest compaction's result, in
	// tokens by the session's calibrated count: not in the reference's
	// get_state, and absent before any compaction.
	LastCompaction *CompactionSize `json:"lastCompaction,omitempty"`
	// RetryBudget is the time budget of the retry chain in progress: not
	// in the reference's get_state, and absent with no chain or no budget
	// (retry.maxElapsedMs 0).
	RetryBudget *RetryBudget `json:"retryBudget,omitempty"`
	// ResetAt (RFC 3339, UTC, to the millisecond) and ResetAtMs (Unix
	// milliseconds) are, while the session waits for a usage limit's
	// reset (retry.waitForReset), when it resets and the retry goes;
	// absent otherwise.
	ResetAt   string `json:"resetAt,omitempty"`
	ResetAtMs int64  `json:"resetAtMs,omitempty"`
	// ActiveModel is, with the fallback setting, the ID of the model the
	// session's runs call (Model's, or a fallback model's); absent
	// without the setting. FallbackUntil and FallbackUntilMs are, on a
	// fallback model, when its cooldown ends and the next turn goes back
	// to Model; absent otherwise. Not in the reference's get_state.
	ActiveModel     string `json:"activeModel,omitempty"`
	FallbackUntil   string `json:"fallbackUntil,omitempty"`
	FallbackUntilMs int64  `json:"fallbackUntilMs,omitempty"`
	// SharedLimit is, while the session waits on a limit shared by the
	// sessions of its process (session.WithLimiter), what holds it, as
	// the shared_limit_wait event said; absent otherwise.
	SharedLimit *SharedLimit `json:"sharedLimit,omitempty"`
}

// SharedLimit is a limit shared by sessions that holds a session's key
// (see events.SharedLimitWait): the key (provider and credential), why,
// and until when (RFC 3339, UTC, to the millisecond, and Unix
// milliseconds).
type SharedLimit struct {
	Key     string `json:"key"`
	Reason  string `json:"reason"`
	Until   string `json:"until"`
	UntilMs int64  `json:"untilMs"`
}

// RetryBudget is the time budget of a retry chain in progress (see
// policy.Status): maxElapsedMs, and when the budget started (the decision
// on the chain's first failure, or the end of its last wait for a reset:
// startedAt) and when it runs out (endsAt), both in milliseconds since the
// Unix epoch: no retry is scheduled to end after endsAt, and what remains
// is endsAt less the reader's clock.
type RetryBudget struct {
	MaxElapsedMs int64 `json:"maxElapsedMs"`
	StartedAt    int64 `json:"startedAt"`
	EndsAt       int64 `json:"endsAt"`
}

// CompactionSize is what a compaction did to the context's size (see
// transcript.Compaction's TokensBefore and TokensAfter).
type CompactionSize struct {
	Reason       transcript.CompactionReason `json:"reason"`
	TokensBefore int                         `json:"tokensBefore"`
	TokensAfter  int                         `json:"tokensAfter"`
	// Truncated are the tool results the compaction kept truncated
	// (transcript.Compaction's Truncated), left out when none.
	Truncated []transcript.Truncation `json:"truncated,omitempty"`
}

// StateOf is the get_state answer of the session id, talking to m, whose
// status is st and whose latest compaction kept truncated the tool
// results truncated (read with st): the one place a State is made from a
// Status, for every driver that answers get_state (the in-process server,
// the Temporal workflow's query).
func StateOf(id string, m policy.Model, st policy.Status, truncated []transcript.Truncation) State {
	var last *CompactionSize
	if st.LastCompaction != "" {
		last = &CompactionSize{Reason: st.LastCompaction, TokensBefore: st.CompactionTokensBefore, TokensAfter: st.CompactionTokensAfter,
			Truncated: truncated}
	}
	var budget *RetryBudget
	if st.MaxElapsedMs > 0 {
		start := st.RetryStarted.UnixMilli()
		budget = &RetryBudget{MaxElapsedMs: st.MaxElapsedMs, StartedAt: start, EndsAt: satAdd(start, st.MaxElapsedMs)}
	}
	out := State{
		SessionID: id, Model: m, IsStreaming: st.Streaming, IsCompacting: st.Compacting,
		IsRetrying: st.Retrying, RetryAttempt: st.Attempt, AutoRetryEnabled: st.RetryEnabled,
		AutoCompactionEnabled: st.CompactionEnabled, MessageCount: st.MessageCount, State: string(st.State),
		LastCompaction: last, RetryBudget: budget,
	}
	out.ResetAt, out.ResetAtMs = wireTime(st.ResetAt)
	out.ActiveModel = st.ActiveModel
	out.FallbackUntil, out.FallbackUntilMs = wireTime(st.FallbackUntil)
	if !st.SharedLimitUntil.IsZero() {
		sl := SharedLimit{Key: st.SharedLimitKey, Reason: st.SharedLimitReason}
		sl.Until, sl.UntilMs = wireTime(st.SharedLimitUntil)
		out.SharedLimit = &sl
	}
	return out
}

// satAdd is a+b, at most math.MaxInt64 (b is not negative).
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// writer serializes output lines.
type writer struct {
	mu     sync.Mutex
	out    *bufio.Writer
	err    error         // the first write error: nothing is written after it
	failed chan struct{} // closed when err is set

	// open counts the turns Serve started whose turn_settled is not written
	// yet; held are the acknowledgements of all of them but the oldest, each
	// written right after the turn_settled of the turn before it.
	open int
	held []response
}

func newWriter(out io.Writer) *writer {
	return &writer{out: bufio.NewWriter(out), failed: make(chan struct{})}
}

func (w *writer) line(v any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lineLocked(v)
}

// lineLocked writes one line; the caller holds w.mu.
func (w *writer) lineLocked(v any) {
	b, err := marshal(v)
	w.writeLocked(b, err)
}

// marshal is json.Marshal without HTML escaping: the bytes of a tool
// call's arguments go out as they are.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeLocked writes the line b, or when encoding it failed (err) a
// response that says so; the caller holds w.mu.
func (w *writer) writeLocked(b []byte, err error) {
	if w.err != nil {
		return
	}
	if err != nil {
		b, _ = json.Marshal(response{Type: "response", Command: "internal", Error: "encoding output: " + err.Error()})
	}
	b = append(b, '\n')
	if _, err = w.out.Write(b); err == nil {
		err = w.out.Flush()
	}
	if err != nil {
		w.err = fmt.Errorf("rpc: writing output: %w", err)
		close(w.failed)
	}
}

// event writes one of the session's events. A turn_settled lets the next
// turn's acknowledgement out.
func (w *writer) event(ev events.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeLocked(marshalEvent(ev))
	if _, ok := ev.(events.TurnSettled); ok && w.open > 0 {
		w.open--
		if len(w.held) > 0 {
			w.lineLocked(w.held[0])
			w.held = w.held[1:]
		}
	}
}

// turnStarted writes the acknowledgement of a prompt whose turn started;
// the caller holds w.mu, taken before the turn started, so the ack goes
// out before any event of its turn. While the previous turn's events are
// still on their way, the ack is held until that turn's turn_settled is
// written (see event).
func (w *writer) turnStarted(ack response) {
	if w.open == 0 {
		w.lineLocked(ack)
	} else {
		w.held = append(w.held, ack)
	}
	w.open++
}

// Serve speaks the protocol over in and out for s until in ends, ctx is
// done or writing out fails. When in ends (io.EOF: a file of commands was
// read to its end, or the client closed its side), the turn in flight
// settles as it would have (its retries and compactions included) and the
// commands still running finish, their events and responses written;
// when ctx is done or a write failed, meanwhile or before, the turn in
// flight is aborted instead. Serve then returns. It returns nil, or
// the write error (wrapped) when writing out failed; after a failed write
// it runs no more commands. It does not wait for a read of in in progress:
// the goroutine reading in ends when that read returns.
//
// A command line longer than 64 MiB gets a parse failure, and the lines
// after it are read as usual.
//
// A prompt's acknowledgement goes out after every event of the turn before
// (its turn_settled included) and before any event of its own turn, so a
// client can tell the turns apart, as long as Serve is the only one
// starting turns on s.
func Serve(ctx context.Context, s *session.Session, in io.Reader, out io.Writer) error {
	w := newWriter(out)
	unsubscribe := s.Subscribe(w.event)
	defer unsubscribe()
	srv := &server{s: s, w: w}

	lines := make(chan lineOrErr)
	stop := make(chan struct{})
	go readLines(in, lines, stop)
	defer close(stop)
	var l lineOrErr
	for {
		var ok bool
		l, ok = next(ctx, lines, w.failed)
		if !ok {
			break
		}
		srv.handle(ctx, l.line, l.tooLong)
	}
	finished := make(chan struct{})
	go func() {
		srv.wg.Wait()
		close(finished)
	}()
	if errors.Is(l.err, io.EOF) {
		// The input ended: the commands it gave run to their end, unless
		// ctx ends or a write fails first.
		select {
		case <-finished:
		case <-ctx.Done():
		case <-w.failed:
		}
	}
	// Stop the turn, let every command finish and its events out.
	s.Abort()
	<-finished
	s.Flush()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ack := range w.held {
		w.lineLocked(ack)
	}
	w.held = nil
	return w.err
}

// next returns the next input line, or false when the input ended, ctx is
// done or a write failed. A failed write wins over a line ready to be
// read: no command runs after it.
func next(ctx context.Context, lines <-chan lineOrErr, failed <-chan struct{}) (lineOrErr, bool) {
	select {
	case <-failed:
		return lineOrErr{}, false
	default:
	}
	select {
	case l := <-lines:
		return l, l.err == nil
	case <-ctx.Done():
	case <-failed:
	}
	return lineOrErr{}, false
}

type lineOrErr struct {
	line    []byte
	tooLong bool
	err     error
}

// readLines reads in line by line and sends each line, then the error that
// ended the input.
func readLines(in io.Reader, out chan<- lineOrErr, stop <-chan struct{}) {
	lr := lines.NewReader(in, maxLine)
	for {
		line, err := lr.Next()
		var l lineOrErr
		switch {
		case err == nil:
			l = lineOrErr{line: bytes.Clone(line)}
		case errors.Is(err, lines.ErrTooLong):
			l = lineOrErr{tooLong: true}
		default:
			l = lineOrErr{err: err}
		}
		select {
		case out <- l:
		case <-stop:
			return
		}
		if l.err != nil {
			return
		}
	}
}

type server struct {
	s  *session.Session
	w  *writer
	wg sync.WaitGroup
}

// command is the envelope every command shares.
type command struct {
	ID   json.RawMessage `json:"id"`
	Type string          `json:"type"`
}

// blank reports whether a line holds nothing but JSON whitespace (spaces,
// tabs, carriage returns): such a line is skipped without a response. Any
// other line gets exactly one.
func blank(line []byte) bool {
	return len(bytes.Trim(line, " \t\r")) == 0
}

func (srv *server) handle(ctx context.Context, line []byte, tooLong bool) {
	parseFail := func(why string) {
		srv.w.line(response{Type: "response", Command: "parse", Success: false, Error: "Failed to parse command: " + why})
	}
	if tooLong {
		parseFail(fmt.Sprintf("line longer than %d MiB", maxLine>>20))
		return
	}
	if blank(line) {
		return
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			parseFail("a command must be a JSON object")
		} else {
			parseFail(err.Error())
		}
		return
	}
	if raw == nil { // the line was null
		parseFail("a command must be a JSON object")
		return
	}
	cmd := command{ID: wiretext.JSON(raw["id"])} // echoed under the text rule
	switch t, ok := raw["type"]; {
	case !ok || string(t) == "null":
		srv.fail(cmd, "unknown", `missing field "type"`)
		return
	case json.Unmarshal(t, &cmd.Type) != nil:
		srv.fail(cmd, "unknown", `field "type" must be a string`)
		return
	case cmd.Type == "":
		srv.fail(cmd, "unknown", `field "type" is empty`)
		return
	}
	h, ok := handlers[cmd.Type]
	if !ok {
		srv.fail(cmd, cmd.Type, fmt.Sprintf("Unknown command: %s", cmd.Type))
		return
	}
	if err := checkFields(raw, h.fields); err != nil {
		srv.fail(cmd, cmd.Type, err.Error())
		return
	}
	h.run(ctx, srv, cmd, raw)
}

func (srv *server) ok(cmd command, data any) {
	srv.w.line(response{ID: cmd.ID, Type: "response", Command: cmd.Type, Success: true, Data: data})
}

func (srv *server) fail(cmd command, name, why string) {
	srv.w.line(response{ID: cmd.ID, Type: "response", Command: name, Success: false, Error: wireText(why)})
}

// async runs f off the reading goroutine.
func (srv *server) async(f func()) {
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		f()
	}()
}

// field kinds a command may carry.
type fieldKind int

const (
	kindString fieldKind = iota
	kindBool
)

type field struct {
	kind     fieldKind
	required bool
}

// checkFields checks the command's own fields: present when required, and
// of the right JSON type. Other keys are ignored, as the reference does.
func checkFields(raw map[string]json.RawMessage, fields map[string]field) error {
	for name, f := range fields {
		v, ok := raw[name]
		if !ok || string(v) == "null" {
			if f.required {
				return fmt.Errorf("missing field %q", name)
			}
			continue
		}
		switch f.kind {
		case kindString:
			var s string
			if json.Unmarshal(v, &s) != nil {
				return fmt.Errorf("field %q must be a string", name)
			}
		case kindBool:
			var b bool
			if json.Unmarshal(v, &b) != nil {
				return fmt.Errorf("field %q must be a boolean", name)
			}
		}
	}
	return nil
}

type handler struct {
	fields map[string]field
	run    func(ctx context.Context, srv *server, cmd command, raw map[string]json.RawMessage)
}

func str(raw map[string]json.RawMessage, name string) string {
	var s string
	_ = json.Unmarshal(raw[name], &s)
	return s
}

func boolean(raw map[string]json.RawMessage, name string) bool {
	var b bool
	_ = json.Unmarshal(raw[name], &b)
	return b
}

var handlers map[string]handler

func init() {
	handlers = map[string]handler{
		"prompt": {map[string]field{"message": {kindString, true}}, func(_ context.Context, srv *server, cmd command, raw map[string]json.RawMessage) {
			// The acknowledgement goes out before any event of the turn:
			// the writer is held while the turn starts, so the event
			// subscriber waits for it. And after the previous turn's
			// events: see turnStarted.
			srv.w.mu.Lock()
			settled, err := srv.s.Send(str(raw, "message"))
			if err != nil {
				srv.w.lineLocked(response{ID: cmd.ID, Type: "response", Command: cmd.Type, Error: wireText(err.Error())})
				srv.w.mu.Unlock()
				return
			}
			srv.w.turnStarted(response{ID: cmd.ID, Type: "response", Command: cmd.Type, Success: true})
			srv.w.mu.Unlock()
			// The turn's end reaches the client as the session's
			// turn_settled event.
			srv.async(func() { <-settled })
		}},
		"abort": {nil, func(_ context.Context, srv *server, cmd command, _ map[string]json.RawMessage) {
			srv.async(func() {
				srv.s.Abort()
				srv.ok(cmd, nil)
			})
		}},
		"set_auto_retry": {map[string]field{"enabled": {kindBool, true}}, func(_ context.Context, srv *server, cmd command, raw map[string]json.RawMessage) {
			srv.s.SetAutoRetryEnabled(boolean(raw, "enabled"))
			srv.ok(cmd, nil)
		}},
		"abort_retry": {nil, func(_ context.Context, srv *server, cmd command, _ map[string]json.RawMessage) {
			srv.s.AbortRetry()
			srv.ok(cmd, nil)
		}},
		"set_auto_compaction": {map[string]field{"enabled": {kindBool, true}}, func(_ context.Context, srv *server, cmd command, raw map[string]json.RawMessage) {
			srv.s.SetAutoCompactionEnabled(boolean(raw, "enabled"))
			srv.ok(cmd, nil)
		}},
		"compact": {map[string]field{"customInstructions": {kindString, false}}, func(ctx context.Context, srv *server, cmd command, raw map[string]json.RawMessage) {
			instructions := str(raw, "customInstructions")
			srv.async(func() {
				res, err := srv.s.Compact(context.WithoutCancel(ctx), instructions)
				if err != nil {
					srv.fail(cmd, cmd.Type, err.Error())
					return
				}
				srv.ok(cmd, wireCompaction(res))
			})
		}},
		"get_state": {nil, func(_ context.Context, srv *server, cmd command, _ map[string]json.RawMessage) {
			s := srv.s
			// One read of Status: the fields never contradict each other.
			st, truncated := s.LastCompactionTruncated()
			srv.ok(cmd, StateOf(s.ID(), s.Model(), st, truncated))
		}},
		"get_messages": {nil, func(_ context.Context, srv *server, cmd command, _ map[string]json.RawMessage) {
			msgs := srv.s.Messages()
			if msgs == nil {
				msgs = []transcript.Message{}
			}
			srv.ok(cmd, map[string]any{"messages": msgs})
		}},
	}
}

// Commands returns the names of the commands Serve understands, sorted.
func Commands() []string {
	return slices.Sorted(maps.Keys(handlers))
}
