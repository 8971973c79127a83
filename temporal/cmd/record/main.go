// Command record plays each scenario of the shared table on a real
// Temporal server and writes its workflow history as JSON (the form the
// Temporal CLI writes and worker.WorkflowReplayer reads), for the replay
// test, into the directory of the release recording them:
//
//	go run ./cmd/record -out testdata/histories/v2       # starts the devserver itself
//	go run ./cmd/record -out testdata/histories/v2 -address localhost:7233 -namespace default
//
// Run it from the temporal module's directory. It writes OUT/NAME.json,
// one file per scenario. A release records into a directory of its own
// and never into an earlier release's: those stand for the workflows the
// earlier release left open (docs/temporal.md, "Upgrades").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/temporal/internal/live"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func run() error {
	address := flag.String("address", "", "a server's `host:port`; empty starts the devserver")
	namespace := flag.String("namespace", "default", "the `namespace` on -address")
	devserver := flag.String("devserver", "devserver", "the devserver module's `directory`")
	out := flag.String("out", "", "where the histories go: the `directory` of this release, testdata/histories/vN")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if *out == "" {
		return errors.New("-out is required: the directory of the release recording, testdata/histories/vN")
	}
	dev := *devserver
	if *address != "" {
		dev = ""
	}
	c, closeAll, err := live.Connect(dev, *address, *namespace)
	if err != nil {
		return err
	}
	defer closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, sc := range scenarios.All() {
		if err := record(ctx, c, sc, filepath.Join(*out, sc.Name+".json")); err != nil {
			return fmt.Errorf("%s: %w", sc.Name, err)
		}
		fmt.Println("recorded", sc.Name)
	}
	for _, st := range stories {
		if err := recordStory(ctx, c, st, *out); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
		fmt.Println("recorded", st.name)
	}
	return nil
}

// record plays sc on a worker of its own and writes its history to path.
func record(ctx context.Context, c client.Client, sc scenarios.Scenario, path string) error {
	queue := "record-" + sc.Name
	id := fmt.Sprintf("record-%s-%d", sc.Name, time.Now().UnixNano())
	acts := &temporal.Activities{Agent: scripted.New(sc.Script())}
	if len(sc.Credentials) > 0 {
		store, err := credentials.NewMemoryCredentials(nil, sc.Credentials...)
		if err != nil {
			return err
		}
		acts.Credentials = store
	}
	w := worker.New(c, queue, worker.Options{DeadlockDetectionTimeout: time.Minute})
	(&temporal.Workflow{Random: scenarios.Draw}).Register(w)
	acts.Register(w)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	first, err := live.Begin(ctx, c, queue, id, sc)
	if err != nil {
		return err
	}
	if err := live.Finish(ctx, c, id, first, sc); err != nil {
		return err
	}
	return writeHistory(ctx, c, id, "", path)
}

// writeHistory writes the history of run runID of workflow id (its
// current run when empty) to path.
func writeHistory(ctx context.Context, c client.Client, id, runID, path string) error {
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err
		}
		hist.Events = append(hist.Events, ev)
	}
	if len(hist.Events) == 0 {
		return errors.New("the history is empty")
	}
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
