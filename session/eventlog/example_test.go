package eventlog_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/eventlog"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// A session whose first call fails with a 503: at level info, the retry is
// a warning and its recovery and the turn's end are info lines.
func ExampleSubscribe() {
	agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{
		{StopReason: "error", ErrorMessage: "503 Service Unavailable"},
		{StopReason: "stop", Text: "done"},
	}})
	cfg := policy.DefaultConfig()
	cfg.Retry.BaseDelayMs = 1
	s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithConfig(cfg), session.WithSessionID("s1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // for a stable output
			}
			return a
		},
	}))
	defer eventlog.Subscribe(s, logger)()
	if err := s.Prompt(context.Background(), "hi"); err != nil {
		fmt.Println(err)
	}
	s.Flush()
	// Output:
	// level=WARN msg=auto_retry_start session.id=s1 retry.attempt=1 retry.max_attempts=3 retry.delay=1ms error.class=retryable error.message="503 Service Unavailable" provider=scripted model=scripted-1
	// level=INFO msg=auto_retry_end session.id=s1 retry.attempt=1 retry.outcome=recovered
	// level=INFO msg=turn_settled session.id=s1 turn.outcome=success
}
