package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"

	"github.com/agentfsm/agentfsm/transcript"
)

// Event is one event line from the server: its type and the whole JSON
// object. Value turns it back into the session's event; Decode reads it
// into a type of the caller's.
type Event struct {
	Type string
	Raw  json.RawMessage
}

// Decode unmarshals the event's JSON into v, a value of the caller's type
// with the wire's field names (docs/rpc.md). The session's own event types
// have no JSON form: use Value for them.
func (e Event) Decode(v any) error { return json.Unmarshal(e.Raw, v) }

// ErrClientClosed is returned by calls on a closed client, or one whose
// server went away.
var ErrClientClosed = errors.New("rpc: client closed")

// Client talks to a server speaking this protocol: the agentfsm binary it
// spawned, or any pair of pipes. It is safe for concurrent use. A call
// made after Close, or once the server's output has ended, returns
// ErrClientClosed at once; so does a call still waiting for its response
// when the output ends.
type Client struct {
	w   io.WriteCloser
	cmd *exec.Cmd

	writeMu sync.Mutex

	mu      sync.Mutex
	nextID  int
	pending map[string]pendingCall
	queue   []Event
	wake    chan struct{}
	events  chan Event
	turns   []*turn // the acknowledged turns not settled yet, oldest first
	last    *turn   // the turn of the last acknowledged prompt
	closed  bool
	quit    chan struct{} // closed by Close
	// done is closed, under mu, when the server's output ends, after every
	// pending call was answered or closed; no call is registered after it.
	done chan struct{}
}

// pendingCall is a command waiting for its response.
type pendingCall struct {
	ch     chan response
	prompt bool
}

// turn is a prompt's turn, from its acknowledgement to its turn_settled.
type turn struct {
	done chan struct{} // closed when the turn settles
	err  error         // the turn's error, set before done is closed
}

// NewClient talks to a server that reads commands from w and writes lines
// to r.
func NewClient(r io.Reader, w io.WriteCloser) *Client {
	c := &Client{
		w: w, pending: map[string]pendingCall{}, wake: make(chan struct{}, 1), events: make(chan Event),
		last: &turn{done: make(chan struct{})}, quit: make(chan struct{}), done: make(chan struct{}),
	}
	close(c.last.done)
	go c.read(r)
	go c.pump()
	return c
}

// Start spawns the agentfsm binary at path with args (for example "rpc",
// "--script", "s.json") and talks to it over its stdin and stdout; its
// stderr goes to stderr when that is not nil.
func Start(path string, stderr io.Writer, args ...string) (*Client, error) {
	cmd := exec.Command(path, args...)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("rpc: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("rpc: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("rpc: starting %s: %w", path, err)
	}
	c := NewClient(out, in)
	c.cmd = cmd
	return c, nil
}

// Close aborts the turn in flight, if any, closes the server's input,
// which ends it, and waits for it to exit when the client spawned it. (A
// server that reads the end of its input lets the turn in flight settle
// first: the abort is what makes Close quick.)
func (c *Client) Close() error {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	inFlight := len(c.turns) > 0 || len(c.pending) > 0
	c.mu.Unlock()
	if already {
		return nil
	}
	close(c.quit)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if !inFlight {
			return
		}
		c.writeMu.Lock()
		defer c.writeMu.Unlock()
		_, _ = io.WriteString(c.w, `{"type":"abort"}`+"\n") // a server gone fails it: Close goes on
	}()
	// A server whose output ended reads no more: closing its input ends
	// the write.
	select {
	case <-wrote:
	case <-c.done:
	}
	err := c.w.Close()
	<-wrote
	<-c.done
	if c.cmd != nil {
		if werr := c.cmd.Wait(); werr != nil {
			return fmt.Errorf("rpc: server: %w", werr)
		}
	}
	return err
}

// Events returns the server's events, in order. Events are queued without
// limit until read, so a client that never reads loses nothing and blocks
// nothing. The channel closes when the server's output ends and every event
// was read, or at Close.
func (c *Client) Events() <-chan Event { return c.events }

func (c *Client) read(r io.Reader) {
	defer func() {
		c.mu.Lock()
		for _, p := range c.pending {
			close(p.ch)
		}
		c.pending = map[string]pendingCall{}
		for _, t := range c.turns {
			t.err = ErrClientClosed
			close(t.done)
		}
		c.turns = nil
		close(c.done)
		c.mu.Unlock()
		c.signal()
	}()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			c.dispatch(line)
		}
		if err != nil {
			return
		}
	}
}

func (c *Client) dispatch(line []byte) {
	var head struct {
		Type    string          `json:"type"`
		ID      json.RawMessage `json:"id"`
		Success bool            `json:"success"`
		Error   string          `json:"error"`
		Code    string          `json:"code"`
	}
	if json.Unmarshal(line, &head) != nil {
		return
	}
	if head.Type == "response" {
		var resp response
		if json.Unmarshal(line, &resp) != nil {
			return
		}
		var id string
		_ = json.Unmarshal(head.ID, &id)
		c.mu.Lock()
		p, ok := c.pending[id]
		delete(c.pending, id)
		if ok && p.prompt && resp.Success {
			// The turn is in flight from its acknowledgement on, here on
			// the reading goroutine: its turn_settled comes later.
			t := &turn{done: make(chan struct{})}
			c.turns = append(c.turns, t)
			c.last = t
		}
		c.mu.Unlock()
		if ok {
			resp.Data = json.RawMessage(rawData(line))
			p.ch <- resp
		}
		return
	}
	c.mu.Lock()
	c.queue = append(c.queue, Event{Type: head.Type, Raw: append(json.RawMessage(nil), line...)})
	if head.Type == "turn_settled" && len(c.turns) > 0 {
		// Turns settle in the order they were acknowledged.
		t := c.turns[0]
		c.turns = c.turns[1:]
		t.err = turnSettled{Success: head.Success, Error: head.Error, Code: head.Code}.err()
		close(t.done)
	}
	c.mu.Unlock()
	c.signal()
}

// rawData extracts a response's data field.
func rawData(line []byte) []byte {
	var v struct {
		Data json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(line, &v)
	return v.Data
}

func (c *Client) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pump moves queued events to the Events channel.
func (c *Client) pump() {
	defer close(c.events)
	for {
		c.mu.Lock()
		batch := c.queue
		c.queue = nil
		c.mu.Unlock()
		for _, ev := range batch {
			select {
			case c.events <- ev:
			case <-c.quit:
				return
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-c.quit:
			return
		case <-c.wake:
		case <-c.done:
			c.mu.Lock()
			empty := len(c.queue) == 0
			c.mu.Unlock()
			if empty {
				return
			}
		}
	}
}

// call sends a command and waits for its response.
func (c *Client) call(ctx context.Context, typ string, fields map[string]any, prompt bool) (json.RawMessage, error) {
	c.mu.Lock()
	if c.closed || c.ended() {
		// Nothing would answer: the reader closed the pending calls.
		c.mu.Unlock()
		return nil, ErrClientClosed
	}
	c.nextID++
	id := "req-" + strconv.Itoa(c.nextID)
	ch := make(chan response, 1)
	c.pending[id] = pendingCall{ch: ch, prompt: prompt}
	c.mu.Unlock()

	msg := map[string]any{"id": id, "type": typ}
	for k, v := range fields {
		msg[k] = v
	}
	line, err := json.Marshal(msg)
	if err != nil {
		c.forget(id)
		return nil, fmt.Errorf("rpc: %w", err)
	}
	c.writeMu.Lock()
	_, err = c.w.Write(append(line, '\n'))
	c.writeMu.Unlock()
	if err != nil {
		c.forget(id)
		return nil, fmt.Errorf("rpc: sending %s: %w", typ, err)
	}
	var resp response
	var ok bool
	select {
	case resp, ok = <-ch:
	case <-c.done:
		// The server went away; a response it sent first is in ch.
		select {
		case resp, ok = <-ch:
		default:
		}
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if !ok {
		return nil, ErrClientClosed
	}
	if !resp.Success {
		return nil, fmt.Errorf("rpc: %s: %s", typ, resp.Error)
	}
	data, _ := resp.Data.(json.RawMessage)
	return data, nil
}

// ended reports whether the server's output has ended.
func (c *Client) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// forget drops a command that was never sent.
func (c *Client) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Prompt sends a prompt and returns once the server acknowledged it; the
// turn's events follow, and WaitForIdle waits for it to settle. A prompt
// the server rejects (busy while a turn is in flight) starts no turn and
// changes nothing about the one in flight.
func (c *Client) Prompt(ctx context.Context, message string) error {
	_, err := c.call(ctx, "prompt", map[string]any{"message": message}, true)
	return err
}

// Abort stops whatever the session is doing and returns once it is quiet.
func (c *Client) Abort(ctx context.Context) error {
	_, err := c.call(ctx, "abort", nil, false)
	return err
}

// SetAutoRetry switches automatic retries on or off.
func (c *Client) SetAutoRetry(ctx context.Context, enabled bool) error {
	_, err := c.call(ctx, "set_auto_retry", map[string]any{"enabled": enabled}, false)
	return err
}

// AbortRetry cancels a pending retry wait.
func (c *Client) AbortRetry(ctx context.Context) error {
	_, err := c.call(ctx, "abort_retry", nil, false)
	return err
}

// SetAutoCompaction switches automatic compaction on or off.
func (c *Client) SetAutoCompaction(ctx context.Context, enabled bool) error {
	_, err := c.call(ctx, "set_auto_compaction", map[string]any{"enabled": enabled}, false)
	return err
}

// Compact compacts the session's context now, and returns the compaction
// (its Reason is transcript.ReasonManual).
func (c *Client) Compact(ctx context.Context, customInstructions string) (transcript.Compaction, error) {
	fields := map[string]any{}
	if customInstructions != "" {
		fields["customInstructions"] = customInstructions
	}
	data, err := c.call(ctx, "compact", fields, false)
	var res compactionResult
	if err == nil {
		err = json.Unmarshal(data, &res)
	}
	if err != nil {
		return transcript.Compaction{}, err
	}
	return res.compaction(transcript.ReasonManual), nil
}

// GetState returns the session's status: the data of get_state.
func (c *Client) GetState(ctx context.Context) (State, error) {
	data, err := c.call(ctx, "get_state", nil, false)
	var st State
	if err == nil {
		err = json.Unmarshal(data, &st)
	}
	return st, err
}

// GetMessages returns the session's runtime context.
func (c *Client) GetMessages(ctx context.Context) ([]transcript.Message, error) {
	data, err := c.call(ctx, "get_messages", nil, false)
	var v struct {
		Messages []transcript.Message `json:"messages"`
	}
	if err == nil {
		err = json.Unmarshal(data, &v)
	}
	return v.Messages, err
}

// WaitForIdle waits until the turn of the last acknowledged Prompt has
// settled (its retries and any overflow recovery included, not just its
// first agent_end) and returns the turn's error, as the server reported it
// (its text, matching the sentinel error its code names: errors.Is(err,
// policy.ErrExhausted) works), or ErrClientClosed when the server went
// away first. When that turn has already settled it returns its result at
// once (nil before any turn). A prompt rejected by the server is not a
// turn: it changes nothing here.
func (c *Client) WaitForIdle(ctx context.Context) error {
	c.mu.Lock()
	t := c.last
	c.mu.Unlock()
	select {
	case <-t.done:
		return t.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
