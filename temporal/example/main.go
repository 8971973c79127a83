// Command example runs one agent session as a Temporal workflow: a worker
// with the session workflow and its activities (the scripted agent, which
// fails twice with transient errors before it answers), a prompt sent as an
// update, and the session's events printed as the sink receives them.
//
//	go run ./example                         # a server on localhost:7233
//	go run ./example -address host:port -namespace default
//	go run ./example -devserver devserver    # starts the devserver itself
//
// Run it from the temporal module's directory.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/temporal/internal/live"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// printer is a sink that prints each event line once.
type printer struct{ next int64 }

func (p *printer) Deliver(_ context.Context, _ string, first int64, lines []json.RawMessage) error {
	for i, l := range lines {
		if n := first + int64(i); n == p.next {
			fmt.Printf("%3d %s\n", n, l)
			p.next++
		}
	}
	return nil
}

func run() error {
	address := flag.String("address", "localhost:7233", "the server's `host:port`")
	namespace := flag.String("namespace", "default", "the `namespace`")
	devserver := flag.String("devserver", "", "start the devserver of this module `directory` instead of dialling -address")
	flag.Parse()

	c, closeAll, err := live.Connect(*devserver, *address, *namespace)
	if err != nil {
		return err
	}
	defer closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The worker: the workflow and the activities, with the embedder's
	// agent, summarizer, credential store and sink.
	agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{
		{StopReason: "error", ErrorMessage: "503 Service Unavailable", LatencyMs: 200},
		{StopReason: "error", ErrorMessage: "overloaded_error: Overloaded", LatencyMs: 200},
		{StopReason: "stop", Text: "Here is the summary.", LatencyMs: 200},
	}})
	const queue = "agentfsm-example"
	w := worker.New(c, queue, worker.Options{})
	(&temporal.Workflow{}).Register(w)
	(&temporal.Activities{Agent: agent, Sink: &printer{}}).Register(w)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	// The client: start the session, prompt, close.
	id := fmt.Sprintf("agentfsm-example-%d", time.Now().UnixNano())
	cfg := policy.DefaultConfig()
	cfg.Retry.BaseDelayMs = 1000
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName,
		temporal.Start{Model: agent.Model(), Config: &cfg}); err != nil {
		return err
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: temporal.UpdatePrompt, Args: []any{"summarize the repository"},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	turn := h.Get(ctx, nil)
	var st struct {
		State        string `json:"state"`
		MessageCount int    `json:"messageCount"`
	}
	v, err := c.QueryWorkflow(ctx, id, "", temporal.QueryState)
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil {
		return err
	}
	if err := c.SignalWorkflow(ctx, id, "", temporal.SignalClose, nil); err != nil {
		return err
	}
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
		return err
	}
	outcome := "succeeded"
	if turn != nil {
		outcome = "failed: " + turn.Error()
	}
	fmt.Printf("the turn %s; state %s, %d messages\n", outcome, st.State, st.MessageCount)
	return turn
}
