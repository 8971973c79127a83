package temporal_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/temporal/claimcheck"
	"github.com/agentfsm/agentfsm/transcript"
)

// counting is a data converter that counts the bytes of the payloads it
// makes: what the workflow's history holds of its inputs and results.
type counting struct {
	converter.DataConverter
	n atomic.Int64
}

func (c *counting) ToPayload(v any) (*commonpb.Payload, error) {
	p, err := c.DataConverter.ToPayload(v)
	c.n.Add(int64(proto.Size(p)))
	return p, err
}

func (c *counting) ToPayloads(vs ...any) (*commonpb.Payloads, error) {
	p, err := c.DataConverter.ToPayloads(vs...)
	c.n.Add(int64(proto.Size(p)))
	return p, err
}

// memStore is a claimcheck.Store in memory.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStore) Put(_ context.Context, key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = data
	return nil
}

func (s *memStore) Get(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.m[key]; ok {
		return d, nil
	}
	return nil, claimcheck.ErrNotFound
}

// conversation is the history of turns turns of 200-byte prompts and
// answers, as a session writes them.
func conversation(turns int) []transcript.Entry {
	var out []transcript.Entry
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range turns {
		u := transcript.Message{ID: fmt.Sprint("u", i), Role: transcript.RoleUser, Timestamp: at,
			Content: transcript.TextContent(strings.Repeat(fmt.Sprintf("prompt %03d ", i), 200/11))}
		a := transcript.Message{ID: fmt.Sprint("a", i), Role: transcript.RoleAssistant, Timestamp: at,
			Provider: scenarios.Model.Provider, Model: scenarios.Model.ID, StopReason: transcript.StopReasonStop,
			Usage:   &transcript.Usage{Input: 100, Output: 20, TotalTokens: 120},
			Content: transcript.TextContent(strings.Repeat(fmt.Sprintf("answer %03d ", i), 200/11))}
		out = append(out, transcript.Entry{Type: transcript.EntryMessage, ID: u.ID, Timestamp: at, Message: &u},
			transcript.Entry{Type: transcript.EntryMessage, ID: a.ID, Timestamp: at, Message: &a})
	}
	return out
}

// payloadBytesOfTurn plays turn n of a conversation of 200-byte prompts
// and answers over dc, the n-1 turns before it in the session's history,
// and returns the payload bytes that turn put in the workflow's history:
// its prompt, run, deliveries and settlement (and the close after it).
func payloadBytesOfTurn(t *testing.T, n int, dc converter.DataConverter) int64 {
	t.Helper()
	c := &counting{DataConverter: dc}
	e := newEnv()
	e.SetDataConverter(c)
	(&temporal.Workflow{Random: scenarios.Draw, MaxPayload: -1}).Register(e)
	agent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{
		{StopReason: "stop", Text: strings.Repeat("answer 500 ", 200/11)},
	}})
	(&temporal.Activities{Agent: agent, MaxPayload: -1}).Register(e)
	var before int64
	var p outcome
	e.RegisterDelayedCallback(func() {
		before = c.n.Load()
		update(e, temporal.UpdatePrompt, "p", &p, strings.Repeat(fmt.Sprintf("prompt %03d ", n-1), 200/11))
	}, time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	start := startOf(policy.DefaultConfig())
	start.History = conversation(n - 1)
	e.ExecuteWorkflow(temporal.WorkflowName, start)
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	require.NoError(t, p.err)
	require.Equal(t, 0, agent.Remaining())
	return c.n.Load() - before
}

// Issue 27 item 2: with the claim-check codec, turn 500 of a conversation
// of 200-byte prompts and answers puts no more payload bytes in the
// history than turn 1 does (≤ 20 KB); without it, the context is in every
// turn's history (docs/temporal.md gives both figures).
func TestHistoryBytesPerTurn(t *testing.T) {
	codec := &claimcheck.Codec{Store: &memStore{m: map[string][]byte{}}}
	withCodec := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), codec)
	on := payloadBytesOfTurn(t, 500, withCodec)
	first := payloadBytesOfTurn(t, 1, withCodec)
	off := payloadBytesOfTurn(t, 500, converter.GetDefaultDataConverter())
	t.Logf("payload bytes of turn 500: %d with the claim-check codec (turn 1: %d), %d without", on, first, off)
	assert.LessOrEqual(t, on, int64(20_000))
	assert.InDelta(t, first, on, 2_000, "turn 500 costs what turn 1 does")
	assert.Greater(t, off, int64(100_000), "without the codec, the context is in every turn's history")
}
