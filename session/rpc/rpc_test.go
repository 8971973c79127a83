package rpc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// served is a session behind Serve, on in-memory pipes.
type served struct {
	s      *session.Session
	agent  *scripted.Agent
	in     *io.PipeWriter
	out    *bufio.Reader
	served chan error
}

func serve(t *testing.T, calls []scripted.Call, opts ...session.Option) *served {
	t.Helper()
	agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: calls})
	// The wire is the reference's, so these tests run under its policy.
	opts = append([]session.Option{session.WithModel(scripted.DefaultModel), session.WithSessionID("rpc-test"), session.WithConfig(policy.ReferenceConfig())}, opts...)
	s, err := session.New(agent, opts...)
	require.NoError(t, err)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	sv := &served{s: s, agent: agent, in: inW, out: bufio.NewReader(outR), served: make(chan error, 1)}
	go func() {
		sv.served <- rpc.Serve(context.Background(), s, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		<-sv.served
		s.Close()
	})
	return sv
}

// send writes one raw line.
func (sv *served) send(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(sv.in, line)
	require.NoError(t, err)
}

// next reads one output line as a JSON object.
func (sv *served) next(t *testing.T) map[string]any {
	t.Helper()
	line, err := sv.out.ReadString('\n')
	require.NoError(t, err)
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &obj), "stdout carries JSON lines only: %q", line)
	return obj
}

// until reads lines until one has the given type, returning all read.
func (sv *served) until(t *testing.T, typ string) []map[string]any {
	t.Helper()
	var got []map[string]any
	for range 1000 {
		obj := sv.next(t)
		got = append(got, obj)
		if obj["type"] == typ {
			return got
		}
	}
	t.Fatalf("no %s line", typ)
	return nil
}

func TestBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sv := serve(t, nil)
		huge := `{"id":"big","type":"prompt","message":"` + strings.Repeat("x", 16<<20) + `"}` + "\n"
		cases := []struct {
			name, line string
			want       map[string]any
		}{
			{"not JSON", "hello\n", map[string]any{"type": "response", "command": "parse", "success": false}},
			{"truncated JSON", `{"type":"get_state"` + "\n", map[string]any{"command": "parse", "success": false}},
			{"JSON not an object", "[1,2]\n", map[string]any{"command": "parse", "success": false, "error": "Failed to parse command: a command must be a JSON object"}},
			{"a JSON string", `"get_state"` + "\n", map[string]any{"command": "parse", "success": false}},
			{"unknown command", `{"id":"u1","type":"fly"}` + "\n", map[string]any{"id": "u1", "command": "fly", "success": false, "error": "Unknown command: fly"}},
			{"no type", `{"id":"u2"}` + "\n", map[string]any{"id": "u2", "success": false, "error": `missing field "type"`}},
			{"type not a string", `{"id":"u3","type":5}` + "\n", map[string]any{"id": "u3", "success": false}},
			{"missing field", `{"id":"m1","type":"prompt"}` + "\n", map[string]any{"id": "m1", "command": "prompt", "success": false, "error": `missing field "message"`}},
			{"mistyped field", `{"id":"m2","type":"set_auto_retry","enabled":"yes"}` + "\n", map[string]any{"id": "m2", "command": "set_auto_retry", "success": false, "error": `field "enabled" must be a boolean`}},
			{"numeric id echoed", `{"id":7,"type":"abort_retry"}` + "\n", map[string]any{"id": float64(7), "command": "abort_retry", "success": true}},
			{"CRLF ending", `{"id":"c1","type":"abort_retry"}` + "\r\n", map[string]any{"id": "c1", "success": true}},
			{"invalid UTF-8", "{\"id\":\"v1\",\"type\":\"set_auto_compaction\",\"enabled\":true,\"x\":\"\xff\"}\n", map[string]any{"id": "v1", "success": true}},
			{"invalid UTF-8 outside JSON", "\xff\xfe\n", map[string]any{"command": "parse", "success": false}},
		}
		for _, c := range cases {
			sv.send(t, c.line)
			got := sv.next(t)
			for k, v := range c.want {
				assert.Equal(t, v, got[k], "%s: %s", c.name, k)
			}
			if got["success"] == false {
				assert.NotEmpty(t, got["error"], c.name)
			}
		}
		// A 16 MiB line is a command like any other.
		sv.send(t, huge)
		got := sv.until(t, "turn_settled")
		assert.Equal(t, map[string]any{"id": "big", "type": "response", "command": "prompt", "success": true}, got[0])
		// And the server still answers.
		sv.send(t, `{"id":"s","type":"get_state"}`+"\n")
		st := sv.next(t)
		assert.Equal(t, true, st["success"])
	})
}

func TestClientRetryThenSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sv := serve(t, []scripted.Call{{StopReason: "error", ErrorMessage: "503 Service Unavailable"}, {StopReason: "stop", Text: "done"}})
		c := rpc.NewClient(sv.out, sv.in)
		defer c.Close()
		ctx := context.Background()
		start := time.Now()
		require.NoError(t, c.Prompt(ctx, "hi"))
		require.NoError(t, c.WaitForIdle(ctx))
		assert.Equal(t, 2*time.Second, time.Since(start))
		var seen []string
		for _, ev := range drain(c) {
			seen = append(seen, ev.Type)
			if ev.Type == "auto_retry_start" {
				v, err := ev.Value()
				require.NoError(t, err)
				e := v.(events.AutoRetryStart)
				assert.Equal(t, events.AutoRetryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 2000, ErrorMessage: "503 Service Unavailable",
					ErrorClass: classify.Retryable, Provider: "scripted", Model: "scripted-1"}, e)
			}
		}
		assert.Contains(t, strings.Join(seen, " "), "agent_end state_change auto_retry_start state_change state_change agent_start")
		assert.Equal(t, "turn_settled", seen[len(seen)-1])
	})
}

// drain returns the events received so far.
func drain(c *rpc.Client) []rpc.Event {
	var out []rpc.Event
	for {
		synctest.Wait()
		select {
		case ev := <-c.Events():
			out = append(out, ev)
		default:
			return out
		}
	}
}

func TestClientSetAutoRetryOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sv := serve(t, []scripted.Call{{StopReason: "error", ErrorMessage: "503 Service Unavailable"}})
		c := rpc.NewClient(sv.out, sv.in)
		defer c.Close()
		ctx := context.Background()
		require.NoError(t, c.SetAutoRetry(ctx, false))
		st, err := c.GetState(ctx)
		require.NoError(t, err)
		assert.False(t, st.AutoRetryEnabled)
		require.NoError(t, c.Prompt(ctx, "hi"))
		err = c.WaitForIdle(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "503")
		for _, ev := range drain(c) {
			assert.NotEqual(t, "auto_retry_start", ev.Type)
		}
	})
}

func TestClientAbortRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sv := serve(t, []scripted.Call{{StopReason: "error", ErrorMessage: "503 Service Unavailable"}})
		c := rpc.NewClient(sv.out, sv.in)
		defer c.Close()
		ctx := context.Background()
		require.NoError(t, c.Prompt(ctx, "hi"))
		time.Sleep(time.Second)
		st, err := c.GetState(ctx)
		require.NoError(t, err)
		assert.Equal(t, rpc.State{SessionID: "rpc-test", Model: scripted.DefaultModel, IsRetrying: true, RetryAttempt: 1,
			AutoRetryEnabled: true, AutoCompactionEnabled: true, MessageCount: 1, State: "backoff"}, st)
		start := time.Now()
		require.NoError(t, c.AbortRetry(ctx))
		err = c.WaitForIdle(ctx)
		require.ErrorContains(t, err, "retry cancelled")
		assert.Zero(t, time.Since(start), "promptly")
		var end events.AutoRetryEnd
		for _, ev := range drain(c) {
			if ev.Type == "auto_retry_end" {
				v, err := ev.Value()
				require.NoError(t, err)
				end = v.(events.AutoRetryEnd)
			}
		}
		assert.Equal(t, events.AutoRetryEnd{Success: false, Attempt: 1, FinalError: "Retry cancelled", Outcome: events.RetryCancelled}, end)
	})
}

func TestClientCompactAndMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.ReferenceConfig()
		cfg.Compaction.KeepRecentTokens = 5
		sv := serve(t, []scripted.Call{{StopReason: "stop", Text: "first answer"}}, session.WithConfig(cfg))
		c := rpc.NewClient(sv.out, sv.in)
		defer c.Close()
		ctx := context.Background()
		require.NoError(t, c.Prompt(ctx, "a first question, long enough to compact"))
		require.NoError(t, c.WaitForIdle(ctx))
		require.NoError(t, c.Prompt(ctx, "a second question, long enough too"))
		require.NoError(t, c.WaitForIdle(ctx))
		msgs, err := c.GetMessages(ctx)
		require.NoError(t, err)
		assert.Len(t, msgs, 4)
		st, err := c.GetState(ctx)
		require.NoError(t, err)
		assert.Nil(t, st.LastCompaction, "no compaction yet")
		res, err := c.Compact(ctx, "keep it short")
		require.NoError(t, err)
		assert.Contains(t, res.Summary, "Focus: keep it short")
		// tokensAfter crosses the wire, and get_state reports the latest
		// compaction's sizes.
		assert.Positive(t, res.TokensAfter)
		st, err = c.GetState(ctx)
		require.NoError(t, err)
		require.NotNil(t, st.LastCompaction)
		assert.Equal(t, rpc.CompactionSize{Reason: transcript.ReasonManual, TokensBefore: res.TokensBefore, TokensAfter: res.TokensAfter}, *st.LastCompaction)
		_, err = c.Compact(ctx, "")
		assert.ErrorContains(t, err, "already compacted")
		msgs, err = c.GetMessages(ctx)
		require.NoError(t, err)
		assert.Equal(t, transcript.RoleSummary, msgs[0].Role)
	})
}

// An abort reaches the session while a compaction runs: the reading goroutine
// is not blocked by the compact command.
func TestAbortDuringCompact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.ReferenceConfig()
		cfg.Compaction.KeepRecentTokens = 5
		blocking := summarizer(func(ctx context.Context) error { <-ctx.Done(); return context.Cause(ctx) })
		sv := serve(t, []scripted.Call{{StopReason: "stop", Text: "answer"}}, session.WithConfig(cfg), session.WithSummarizer(blocking))
		c := rpc.NewClient(sv.out, sv.in)
		defer c.Close()
		ctx := context.Background()
		require.NoError(t, c.Prompt(ctx, "a first question, long enough to compact"))
		require.NoError(t, c.WaitForIdle(ctx))
		require.NoError(t, c.Prompt(ctx, "a second question, long enough too"))
		require.NoError(t, c.WaitForIdle(ctx))
		compacted := make(chan error, 1)
		go func() { _, err := c.Compact(ctx, ""); compacted <- err }()
		synctest.Wait()
		require.NoError(t, c.Abort(ctx))
		assert.ErrorContains(t, <-compacted, "compaction cancelled")
	})
}

type summarizer func(ctx context.Context) error

func (f summarizer) Summarize(ctx context.Context, _ policy.SummaryRequest) (policy.Summary, error) {
	return policy.Summary{}, f(ctx)
}

func TestOverflowRecoveryOverRPC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.ReferenceConfig()
		cfg.Compaction.KeepRecentTokens = 5
		sv := serve(t, []scripted.Call{
			{StopReason: "stop", Text: "first"},
			{StopReason: "error", ErrorMessage: "prompt is too long: 213462 tokens > 200000 maximum"},
			{StopReason: "stop", Text: "recovered", LatencyMs: 300},
		}, session.WithConfig(cfg))
		c := rpc.NewClient(sv.out, sv.in)
		defer c.Close()
		ctx := context.Background()
		require.NoError(t, c.Prompt(ctx, "a first question, long enough to compact"))
		require.NoError(t, c.WaitForIdle(ctx))
		drain(c)
		require.NoError(t, c.Prompt(ctx, "a second question, long enough too"))
		require.NoError(t, c.WaitForIdle(ctx), "WaitForIdle waits past the first agent_end, through the recovery")
		var seen []string
		for _, ev := range drain(c) {
			seen = append(seen, ev.Type)
		}
		joined := strings.Join(seen, " ")
		assert.Contains(t, joined, "agent_end state_change auto_compaction_start state_change auto_compaction_end state_change agent_start")
		assert.Equal(t, 2, strings.Count(joined, "agent_end"))
	})
}

// Input closed in the middle of a turn (a file of commands read to its
// end): the turn settles as it would have, its retry included, its events
// all written, and Serve returns nil. Issue 26 item 4.
func TestInputClosedMidTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sv := serve(t, []scripted.Call{{StopReason: "error", ErrorMessage: "503 Service Unavailable"}, {StopReason: "stop", Text: "settled"}})
		sv.send(t, `{"id":"p","type":"prompt","message":"hi"}`+"\n")
		sv.next(t) // the acknowledgement
		time.Sleep(500 * time.Millisecond)
		sv.in.Close()
		got := sv.until(t, "turn_settled")
		assert.Equal(t, true, got[len(got)-1]["success"], "the turn was not aborted: %v", got[len(got)-1])
		var types []string
		for _, ev := range got {
			types = append(types, ev["type"].(string))
		}
		assert.Contains(t, strings.Join(types, " "), "auto_retry_start")
		assert.Contains(t, strings.Join(types, " "), `auto_retry_end`)
		go io.Copy(io.Discard, sv.out)
		assert.NoError(t, <-sv.served)
		sv.served <- nil // for the cleanup
		msgs := sv.s.Messages()
		require.Len(t, msgs, 2)
		assert.Equal(t, "settled", msgs[1].Text())
	})
}

// Input closed in the middle of a turn, then the context ends (a signal)
// before the turn settles: the turn is aborted then, its events written.
func TestInputClosedThenContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{{StopReason: "error", ErrorMessage: "503 Service Unavailable"}}})
		cfg := policy.ReferenceConfig()
		cfg.Retry.BaseDelayMs = 3_600_000
		s, err := session.New(agent, session.WithConfig(cfg))
		require.NoError(t, err)
		defer s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		var out bytes.Buffer
		served := make(chan error, 1)
		go func() { served <- rpc.Serve(ctx, s, strings.NewReader(`{"type":"prompt","message":"hi"}`+"\n"), &out) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case <-served:
			t.Fatal("Serve returned while the turn waits to retry")
		default:
		}
		cancel()
		require.NoError(t, <-served)
		assert.Contains(t, out.String(), `"type":"turn_settled","success":false`)
		assert.Contains(t, out.String(), "aborted")
	})
}

func TestCommands(t *testing.T) {
	assert.Equal(t, []string{"abort", "abort_retry", "compact", "get_messages", "get_state", "prompt", "set_auto_compaction", "set_auto_retry"}, rpc.Commands())
}

// TestClientBusyPromptKeepsTurnInFlight: a prompt answered busy while a
// turn runs changes nothing about that turn: a WaitForIdle already waiting
// and one called after the busy reply both wait for the turn and return its
// result. Issue item 25.
func TestClientBusyPromptKeepsTurnInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sv := serve(t, []scripted.Call{{StopReason: "stop", Text: "one", LatencyMs: 1000}})
		c := rpc.NewClient(sv.out, sv.in)
		defer c.Close()
		ctx := context.Background()
		require.NoError(t, c.Prompt(ctx, "one"))
		// The waiters give up after a minute, should they wait for ever.
		waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		before := make(chan error, 1)
		go func() { before <- c.WaitForIdle(waitCtx) }()
		synctest.Wait()
		require.ErrorContains(t, c.Prompt(ctx, "two"), "busy")
		after := make(chan error, 1)
		go func() { after <- c.WaitForIdle(waitCtx) }()
		time.Sleep(500 * time.Millisecond)
		select {
		case err := <-before:
			t.Errorf("the waiter from before the busy prompt returned while turn one runs: %v", err)
		case err := <-after:
			t.Errorf("the waiter from after the busy prompt returned while turn one runs: %v", err)
		default:
		}
		time.Sleep(time.Second)
		for name, ch := range map[string]chan error{"before": before, "after": after} {
			select {
			case err := <-ch:
				assert.NoError(t, err, name)
			default:
				t.Errorf("the waiter from %s the busy prompt did not return with turn one", name)
			}
		}
		assert.NoError(t, c.WaitForIdle(ctx))
	})
}

// TestClientSettlesTurnsInOrder: each turn_settled settles the oldest
// acknowledged turn, also when the next prompt's acknowledgement arrives
// before it. Issue item 25.
func TestClientSettlesTurnsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cmdR, cmdW := io.Pipe()
		outR, outW := io.Pipe()
		c := rpc.NewClient(outR, cmdW)
		cmds := bufio.NewReader(cmdR)
		ctx := context.Background()
		// acknowledge answers the next command with a success.
		acknowledge := func() {
			line, err := cmds.ReadString('\n')
			require.NoError(t, err)
			var cmd struct{ ID string }
			require.NoError(t, json.Unmarshal([]byte(line), &cmd))
			_, err = fmt.Fprintf(outW, `{"id":%q,"type":"response","command":"prompt","success":true}`+"\n", cmd.ID)
			require.NoError(t, err)
		}
		// The waiters give up after a minute, should they wait for ever.
		waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		prompted := make(chan error, 1)
		go func() { prompted <- c.Prompt(ctx, "one") }()
		acknowledge()
		require.NoError(t, <-prompted)
		first := make(chan error, 1)
		go func() { first <- c.WaitForIdle(waitCtx) }()
		synctest.Wait()
		go func() { prompted <- c.Prompt(ctx, "two") }()
		acknowledge()
		require.NoError(t, <-prompted)
		second := make(chan error, 1)
		go func() { second <- c.WaitForIdle(waitCtx) }()

		_, err := io.WriteString(outW, `{"type":"turn_settled","success":false,"error":"one failed"}`+"\n")
		require.NoError(t, err)
		synctest.Wait()
		select {
		case err := <-first:
			assert.EqualError(t, err, "one failed")
		default:
			t.Error("turn one's turn_settled did not settle turn one")
		}
		select {
		case err := <-second:
			t.Errorf("turn one's turn_settled settled turn two: %v", err)
		default:
		}
		_, err = io.WriteString(outW, `{"type":"turn_settled","success":true}`+"\n")
		require.NoError(t, err)
		synctest.Wait()
		select {
		case err := <-second:
			assert.NoError(t, err)
		default:
			t.Error("turn two's turn_settled did not settle turn two")
		}

		go io.Copy(io.Discard, cmdR)
		outW.Close()
		assert.NoError(t, c.Close())
	})
}

// TestEveryReplyIsValidJSON: ids and types with invalid UTF-8, control
// characters, null: every reply is one line of valid JSON in valid UTF-8,
// with the error that describes the line. Issue item 26.
func TestEveryReplyIsValidJSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sv := serve(t, nil)
		cases := []struct {
			name, line string
			want       map[string]any
		}{
			{"id with invalid UTF-8", "{\"id\":\"a\xffb\",\"type\":\"abort_retry\"}\n",
				map[string]any{"id": "a\uFFFDb", "command": "abort_retry", "success": true}},
			{"id, a cut rune", "{\"id\":\"\xe2\x82\",\"type\":\"abort_retry\"}\n",
				map[string]any{"id": "\uFFFD\uFFFD", "success": true}},
			{"id object with invalid UTF-8 in a key and a value", "{\"id\":{\"k\xfe\":[\"\xc3\",1e400]},\"type\":\"abort_retry\"}\n",
				map[string]any{"id": map[string]any{"k\uFFFD": []any{"\uFFFD", json.Number("1e400")}}, "success": true}},
			{"id with a raw line separator", "{\"id\":[\"a\u2028b\u2029\"],\"type\":\"abort_retry\"}\n",
				map[string]any{"id": []any{"a\u2028b\u2029"}, "success": true}},
			{"id with a lone surrogate", `{"id":{"\ud800":"\udc00x\ud83d\ude00"},"type":"abort_retry"}` + "\n",
				map[string]any{"id": map[string]any{"\uFFFD": "\uFFFDx\U0001F600"}, "success": true}},
			{"type with invalid UTF-8", "{\"id\":\"t\",\"type\":\"get\xffstate\"}\n",
				map[string]any{"id": "t", "command": "get\uFFFDstate", "success": false, "error": "Unknown command: get\uFFFDstate"}},
			{"a form feed", "\f\n",
				map[string]any{"command": "parse", "success": false, "error": `Failed to parse command: invalid character '\f' looking for beginning of value`}},
			{"a vertical tab and a no-break space", "\v\u00a0\n",
				map[string]any{"command": "parse", "success": false, "error": `Failed to parse command: invalid character '\v' looking for beginning of value`}},
			{"null", "null\n",
				map[string]any{"command": "parse", "success": false, "error": "Failed to parse command: a command must be a JSON object"}},
			{"null among spaces", " \tnull \r\n",
				map[string]any{"command": "parse", "success": false, "error": "Failed to parse command: a command must be a JSON object"}},
			{"type null", `{"id":"n","type":null}` + "\n",
				map[string]any{"id": "n", "command": "unknown", "success": false, "error": `missing field "type"`}},
			{"type empty", `{"id":"e","type":""}` + "\n",
				map[string]any{"id": "e", "command": "unknown", "success": false, "error": `field "type" is empty`}},
			{"type an object", `{"id":"o","type":{}}` + "\n",
				map[string]any{"id": "o", "command": "unknown", "success": false, "error": `field "type" must be a string`}},
			{"id null", `{"id":null,"type":"abort_retry"}` + "\n",
				map[string]any{"id": nil, "success": true}},
		}
		for _, c := range cases {
			sv.send(t, c.line)
			line, err := sv.out.ReadBytes('\n')
			require.NoError(t, err)
			assert.True(t, json.Valid(line), "%s: not JSON: %q", c.name, line)
			assert.True(t, utf8.Valid(line), "%s: not UTF-8: %q", c.name, line)
			assert.False(t, bytes.ContainsAny(line, "\u2028\u2029"), "%s: a raw line separator: %q", c.name, line)
			assert.False(t, bytes.Contains(line, []byte(`\ud800`)) || bytes.Contains(line, []byte(`"\udc00`)), "%s: a lone surrogate: %q", c.name, line)
			var got map[string]any
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.UseNumber()
			require.NoError(t, dec.Decode(&got), c.name)
			assert.Equal(t, "response", got["type"], c.name)
			for k, v := range c.want {
				assert.Equal(t, v, got[k], "%s: %s", c.name, k)
			}
		}
		// Blank lines, of JSON whitespace only, get no reply.
		sv.send(t, "\n \n\t\r\n\r\r\n"+`{"id":"after","type":"abort_retry"}`+"\n")
		assert.Equal(t, "after", sv.next(t)["id"])
	})
}

// failingWriter takes n bytes, then fails every write.
type failingWriter struct {
	mu      sync.Mutex
	n       int
	written bytes.Buffer
}

var errDiskFull = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(p) > w.n {
		k := w.n
		w.written.Write(p[:k])
		w.n = 0
		return k, errDiskFull
	}
	w.n -= len(p)
	w.written.Write(p)
	return len(p), nil
}

// TestServeStopsAtFailedWrite: once a response cannot be written, Serve
// runs no further command and returns the write error. Issue item 27.
func TestServeStopsAtFailedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := session.New(scripted.New(scripted.Script{Model: scripted.DefaultModel}), session.WithModel(scripted.DefaultModel), session.WithConfig(policy.ReferenceConfig()))
		require.NoError(t, err)
		defer s.Close()
		in := strings.NewReader(`{"id":"1","type":"get_state"}` + "\n" + `{"id":"2","type":"set_auto_retry","enabled":false}` + "\n")
		out := &failingWriter{n: 10}
		err = rpc.Serve(context.Background(), s, in, out)
		require.ErrorIs(t, err, errDiskFull)
		assert.ErrorContains(t, err, "rpc: writing output")
		assert.True(t, s.Status().RetryEnabled, "the command after the failed write did not run")
	})
}

// TestServeStopsWhenEventsCannotBeWritten: a write of the turn's events
// fails while the input stays open: Serve aborts the turn and returns the
// write error without waiting for more input. Issue item 27.
func TestServeStopsWhenEventsCannotBeWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := session.New(scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{{StopReason: "stop", LatencyMs: 10000}}}),
			session.WithModel(scripted.DefaultModel), session.WithConfig(policy.ReferenceConfig()))
		require.NoError(t, err)
		defer s.Close()
		inR, inW := io.Pipe()
		defer inW.Close()
		ack := `{"id":"p","type":"response","command":"prompt","success":true}` + "\n"
		out := &failingWriter{n: len(ack) + 5}
		served := make(chan error, 1)
		start := time.Now()
		go func() { served <- rpc.Serve(context.Background(), s, inR, out) }()
		_, err = io.WriteString(inW, `{"id":"p","type":"prompt","message":"hi"}`+"\n")
		require.NoError(t, err)
		select {
		case err := <-served:
			require.ErrorIs(t, err, errDiskFull)
		case <-time.After(time.Minute):
			t.Fatal("Serve still runs after its output failed")
		}
		assert.Less(t, time.Since(start), 10*time.Second, "the turn was aborted")
		assert.False(t, s.Status().Streaming)
		assert.Equal(t, "idle", string(s.Status().State))
		assert.True(t, strings.HasPrefix(out.written.String(), ack), out.written.String())
	})
}

// TestTurnSettledCarriesErrorCode: turn_settled says why a turn failed with
// a code beside the text, and the client turns the code back into the
// session's sentinel error, so errors.Is works over the wire. Issue item 5.
func TestTurnSettledCarriesErrorCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const s503 = "503 Service Unavailable"
		fail := scripted.Call{StopReason: "error", ErrorMessage: s503}
		sv := serve(t, []scripted.Call{fail, fail, fail, fail, fail, fail,
			{StopReason: "error", ErrorMessage: "prompt is too long: 213462 tokens > 200000 maximum"}})
		c := rpc.NewClient(sv.out, sv.in)
		defer c.Close()
		ctx := context.Background()

		require.NoError(t, c.Prompt(ctx, "exhaust the retries"))
		err := c.WaitForIdle(ctx)
		assert.ErrorIs(t, err, policy.ErrExhausted)
		assert.ErrorIs(t, err, policy.ErrProvider)
		assert.EqualError(t, err, "session: retries exhausted after 3 attempts: "+s503)

		require.NoError(t, c.SetAutoRetry(ctx, false))
		require.NoError(t, c.Prompt(ctx, "no retry"))
		err = c.WaitForIdle(ctx)
		assert.ErrorIs(t, err, policy.ErrProvider)
		assert.NotErrorIs(t, err, policy.ErrExhausted)
		assert.EqualError(t, err, "session: provider error: "+s503)

		require.NoError(t, c.SetAutoRetry(ctx, true))
		require.NoError(t, c.Prompt(ctx, "cancel the retry"))
		time.Sleep(time.Second)
		require.NoError(t, c.AbortRetry(ctx))
		err = c.WaitForIdle(ctx)
		assert.ErrorIs(t, err, policy.ErrRetryCancelled)
		assert.NotErrorIs(t, err, policy.ErrProvider)

		require.NoError(t, c.SetAutoCompaction(ctx, false))
		require.NoError(t, c.Prompt(ctx, "overflow"))
		err = c.WaitForIdle(ctx)
		assert.ErrorIs(t, err, policy.ErrOverflow)

		require.NoError(t, c.Prompt(ctx, "succeed"))
		require.NoError(t, c.WaitForIdle(ctx))

		var codes []string
		for _, ev := range drain(c) {
			if ev.Type != "turn_settled" {
				continue
			}
			var line struct {
				Code *string `json:"code"`
			}
			require.NoError(t, ev.Decode(&line))
			if line.Code == nil {
				codes = append(codes, "none")
			} else {
				codes = append(codes, *line.Code)
			}
			v, err := ev.Value()
			require.NoError(t, err)
			if settled := v.(events.TurnSettled); settled.Err != nil {
				assert.Contains(t, string(ev.Raw), `"code":`)
			}
		}
		assert.Equal(t, []string{"exhausted", "provider", "retry_cancelled", "overflow", "none"}, codes)
	})
}

// TestPolicyErrorsKeepTheirWireText: the policy's errors say "policy:" in
// Go, but on the wire they read as they always have, "session:" — a
// response's error has no code, so a client tells a busy session from
// other failures by its text. Pinned byte for byte: a busy prompt's
// response, a compaction's with nothing to compact, and the turn_settled of an exhausted
// chain and of an abort.
func TestPolicyErrorsKeepTheirWireText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const s503 = "503 Service Unavailable"
		fail := scripted.Call{StopReason: "error", ErrorMessage: s503}
		sv := serve(t, []scripted.Call{{StopReason: "stop", Text: "one", LatencyMs: 1000}, fail, fail, fail, fail,
			{StopReason: "stop", Text: "slow", LatencyMs: 60000}})
		line := func() string {
			t.Helper()
			l, err := sv.out.ReadString('\n')
			require.NoError(t, err)
			return strings.TrimSuffix(l, "\n")
		}
		until := func(prefix string) string {
			t.Helper()
			for range 100 {
				if l := line(); strings.HasPrefix(l, prefix) {
					return l
				}
			}
			t.Fatalf("no line %s", prefix)
			return ""
		}
		sv.send(t, `{"id":"1","type":"prompt","message":"one"}`+"\n")
		assert.Equal(t, `{"id":"1","type":"response","command":"prompt","success":true}`, line())
		sv.send(t, `{"id":"2","type":"prompt","message":"two"}`+"\n")
		assert.Equal(t, `{"id":"2","type":"response","command":"prompt","success":false,"error":"session: busy: a turn is in flight"}`, until(`{"id":"2"`))
		assert.Equal(t, `{"type":"turn_settled","success":true}`, until(`{"type":"turn_settled"`))

		sv.send(t, `{"id":"3","type":"compact"}`+"\n")
		assert.Equal(t, `{"id":"3","type":"response","command":"compact","success":false,"error":"session: nothing to compact"}`, until(`{"id":"3"`))

		sv.send(t, `{"id":"5","type":"prompt","message":"exhaust"}`+"\n")
		assert.Equal(t, `{"type":"turn_settled","success":false,"error":"session: retries exhausted after 3 attempts: 503 Service Unavailable","code":"exhausted","errorClass":"retryable"}`,
			until(`{"type":"turn_settled"`))

		sv.send(t, `{"id":"6","type":"prompt","message":"slow"}`+"\n")
		until(`{"id":"6"`)
		sv.send(t, `{"id":"7","type":"abort"}`+"\n")
		assert.Equal(t, `{"type":"turn_settled","success":false,"error":"session: aborted","code":"aborted"}`, until(`{"type":"turn_settled"`))
	})
}

// TestClientCloseAbortsTheTurn: a server lets the turn in flight settle at
// the end of its input, so the client's Close aborts it first: Close
// returns at once, though the turn waits an hour to retry. Issue 26
// item 4.
func TestClientCloseAbortsTheTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.ReferenceConfig()
		cfg.Retry.BaseDelayMs = 3_600_000
		sv := serve(t, []scripted.Call{{StopReason: "error", ErrorMessage: "503 Service Unavailable"}}, session.WithConfig(cfg))
		c := rpc.NewClient(sv.out, sv.in)
		require.NoError(t, c.Prompt(context.Background(), "hi"))
		time.Sleep(time.Second)
		start := time.Now()
		require.NoError(t, c.Close())
		assert.NoError(t, <-sv.served)
		sv.served <- nil // for the cleanup
		assert.Less(t, time.Since(start), time.Minute, "Close did not wait for the retry")
	})
}
