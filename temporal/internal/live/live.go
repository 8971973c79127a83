// Package live plays the shared scenarios on a real Temporal server: the
// devserver command (the server module's temporaltest, in a process of its
// own) started on the loopback interface, a client and workers on it. The
// real-server test and the history recorder share it.
package live

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/temporal"
)

// Server is a devserver process.
type Server struct {
	// Address is the frontend's host:port, Namespace the namespace it
	// made.
	Address   string `json:"address"`
	Namespace string `json:"namespace"`

	cmd   *exec.Cmd
	stdin io.WriteCloser
	dir   string
}

// Build builds the devserver command of the module in dir (the temporal
// module's devserver directory) into a temporary directory and returns
// its path; remove that directory when done.
func Build(ctx context.Context, dir string) (string, error) {
	tmp, err := os.MkdirTemp("", "agentfsm-devserver-")
	if err != nil {
		return "", fmt.Errorf("live: %w", err)
	}
	bin := filepath.Join(tmp, "devserver")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("live: building the devserver in %s: %w\n%s", dir, err, out)
	}
	return bin, nil
}

// Start builds and starts the devserver of dir, and returns once it
// serves.
func Start(ctx context.Context, dir string) (*Server, error) {
	bin, err := Build(ctx, dir)
	if err != nil {
		return nil, err
	}
	s := &Server{dir: filepath.Dir(bin), cmd: exec.Command(bin)}
	s.cmd.Stderr = os.Stderr
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		_ = os.RemoveAll(s.dir)
		return nil, fmt.Errorf("live: %w", err)
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		_ = os.RemoveAll(s.dir)
		return nil, fmt.Errorf("live: %w", err)
	}
	if err := s.cmd.Start(); err != nil {
		_ = os.RemoveAll(s.dir)
		return nil, fmt.Errorf("live: starting the devserver: %w", err)
	}
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, s)
	}
	if err != nil || s.Address == "" {
		_ = s.Stop()
		return nil, fmt.Errorf("live: the devserver did not say where it serves (%q): %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return s, nil
}

// Stop stops the server and waits for its process to end.
func (s *Server) Stop() error {
	_ = s.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		err = <-done
	}
	_ = os.RemoveAll(s.dir)
	return err
}

// Dial connects a client to the server.
func (s *Server) Dial() (client.Client, error) {
	c, err := client.Dial(client.Options{HostPort: s.Address, Namespace: s.Namespace, Logger: quiet{}})
	if err != nil {
		return nil, fmt.Errorf("live: %w", err)
	}
	return c, nil
}

// Connect starts the devserver of the directory devserver and dials it,
// or, when devserver is empty, dials the server at address in namespace.
// closeAll closes the client and stops the devserver it started.
func Connect(devserver, address, namespace string) (c client.Client, closeAll func(), err error) {
	if devserver == "" {
		if c, err = client.Dial(client.Options{HostPort: address, Namespace: namespace}); err != nil {
			return nil, nil, fmt.Errorf("live: %w", err)
		}
		return c, c.Close, nil
	}
	// The first build of the server takes minutes: no deadline.
	srv, err := Start(context.Background(), devserver)
	if err != nil {
		return nil, nil, err
	}
	if c, err = srv.Dial(); err != nil {
		_ = srv.Stop()
		return nil, nil, err
	}
	return c, func() { c.Close(); _ = srv.Stop() }, nil
}

// Begin starts sc's workflow as id on taskQueue and sends its first
// prompt; it returns the prompt's update, accepted.
func Begin(ctx context.Context, c client.Client, taskQueue, id string, sc scenarios.Scenario) (client.WorkflowUpdateHandle, error) {
	cfg := sc.Config()
	in := temporal.Start{SessionID: scenarios.SessionID, Model: scenarios.Model, Config: &cfg, Credentials: len(sc.Credentials) > 0}
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, temporal.WorkflowName, in); err != nil {
		return nil, fmt.Errorf("live: starting %s: %w", id, err)
	}
	return prompt(ctx, c, id, 0, sc)
}

func prompt(ctx context.Context, c client.Client, id string, i int, sc scenarios.Scenario) (client.WorkflowUpdateHandle, error) {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateID: fmt.Sprint("prompt-", i), UpdateName: temporal.UpdatePrompt,
		Args: []any{sc.Prompts[i]}, WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	if err != nil {
		return nil, fmt.Errorf("live: %s: prompt %d: %w", id, i+1, err)
	}
	return h, nil
}

// Finish plays the rest of sc after Begin: it waits for the first turn
// (aborting it after sc.AbortAfter when set), sends the other prompts one
// after the other, closes the session and waits for the workflow's end.
func Finish(ctx context.Context, c client.Client, id string, first client.WorkflowUpdateHandle, sc scenarios.Scenario) error {
	if sc.AbortAfter > 0 {
		// The story aborts during the first backoff: wait for it rather
		// than for the time, which a loaded machine stretches.
		if err := Await(ctx, c, id, func(st rpc.State) bool { return st.State == "backoff" }); err != nil {
			return err
		}
		if err := c.SignalWorkflow(ctx, id, "", temporal.SignalAbort, nil); err != nil {
			return fmt.Errorf("live: %s: abort: %w", id, err)
		}
	}
	h := first
	for i := range sc.Prompts {
		if i > 0 {
			var err error
			if h, err = prompt(ctx, c, id, i, sc); err != nil {
				return err
			}
		}
		// A turn that failed is part of the story: its error is the
		// update's.
		if err := h.Get(ctx, nil); err != nil && !isTurnError(err) {
			return fmt.Errorf("live: %s: prompt %d: %w", id, i+1, err)
		}
	}
	if err := c.SignalWorkflow(ctx, id, "", temporal.SignalClose, nil); err != nil {
		return fmt.Errorf("live: %s: close: %w", id, err)
	}
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
		return fmt.Errorf("live: %s: %w", id, err)
	}
	return nil
}

// Await queries the session's state until ok accepts it.
func Await(ctx context.Context, c client.Client, id string, ok func(rpc.State) bool) error {
	for {
		v, err := c.QueryWorkflow(ctx, id, "", temporal.QueryState)
		if err != nil {
			return fmt.Errorf("live: %s: get_state: %w", id, err)
		}
		var st rpc.State
		if err := v.Get(&st); err != nil {
			return fmt.Errorf("live: %s: get_state: %w", id, err)
		}
		if ok(st) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("live: %s: still %q: %w", id, st.State, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// isTurnError reports whether err is a turn's failure, as the prompt
// update reports it.
func isTurnError(err error) bool {
	var app interface{ Type() string }
	return errors.As(err, &app) && app.Type() != ""
}
