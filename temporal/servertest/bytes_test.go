package servertest_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/temporal/claimcheck"
	"github.com/agentfsm/agentfsm/temporal/internal/live"
	"github.com/agentfsm/agentfsm/transcript"
)

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

// Issue 27 item 2, on a real server: turn 500 of a conversation of
// 200-byte prompts and answers (the 499 before it in the session's
// history), with the claim-check codec, costs the history at most 20 KB:
// the sum of its events' sizes, from the prompt's update to the end.
func TestHistoryBytesPerTurnOnAServer(t *testing.T) {
	srv, err := live.Start(t.Context(), "../devserver")
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Stop()) }()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	store, err := claimcheck.NewDir(t.TempDir())
	require.NoError(t, err)
	codec := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), &claimcheck.Codec{Store: store})

	turn := func(dc converter.DataConverter, id string) int {
		c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: srv.Namespace, DataConverter: dc,
			Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		require.NoError(t, err)
		defer c.Close()
		w := worker.New(c, id, worker.Options{DeadlockDetectionTimeout: time.Minute})
		(&temporal.Workflow{Random: scenarios.Draw, MaxPayload: -1}).Register(w)
		agent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{{StopReason: "stop", Text: strings.Repeat("answer 499 ", 200/11)}}})
		(&temporal.Activities{Agent: agent, Sink: &sink{}, MaxPayload: -1}).Register(w)
		require.NoError(t, w.Start())
		defer w.Stop()
		cfg := policy.DefaultConfig()
		_, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: id}, temporal.WorkflowName,
			temporal.Start{SessionID: id, Model: scenarios.Model, Config: &cfg, History: conversation(499)})
		require.NoError(t, err)
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateID: "p", UpdateName: temporal.UpdatePrompt,
			Args: []any{strings.Repeat("prompt 499 ", 200/11)}, WaitForStage: client.WorkflowUpdateStageAccepted})
		require.NoError(t, err)
		require.NoError(t, h.Get(ctx, nil))
		require.NoError(t, c.SignalWorkflow(ctx, id, "", temporal.SignalClose, nil))
		require.NoError(t, c.GetWorkflow(ctx, id, "").Get(ctx, nil))
		size, counting := 0, false
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if ev.GetWorkflowExecutionUpdateAcceptedEventAttributes() != nil {
				counting = true
			}
			if counting {
				size += proto.Size(ev)
			}
		}
		return size
	}
	on := turn(codec, "bytes-codec")
	off := turn(converter.GetDefaultDataConverter(), "bytes-plain")
	t.Logf("history bytes of turn 500: %d with the claim-check codec, %d without", on, off)
	assert.LessOrEqual(t, on, 20_000)
	assert.Greater(t, off, 100_000)
}
