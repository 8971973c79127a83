package session_test

import (
	"context"
	"fmt"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// A session embedding an agent: the first model call fails with a 503, the
// session waits (2 s by default; 10 ms here) and continues, and Prompt
// returns once the retry succeeded.
func Example() {
	agent := scripted.New(scripted.Script{Calls: []scripted.Call{
		{StopReason: "error", ErrorMessage: "503 Service Unavailable"},
		{StopReason: "stop", Text: "done"},
	}})
	cfg := policy.DefaultConfig()
	cfg.Retry.BaseDelayMs = 10
	s, err := session.New(agent, session.WithConfig(cfg))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	s.Subscribe(func(ev events.Event) {
		switch e := ev.(type) {
		case events.AutoRetryStart:
			fmt.Printf("retry %d/%d in %d ms: %s\n", e.Attempt, e.MaxAttempts, e.DelayMs, e.ErrorMessage)
		case events.AutoRetryEnd:
			fmt.Printf("retry ended, success: %v\n", e.Success)
		}
	})
	err = s.Prompt(context.Background(), "hello")
	s.Close() // delivers the events already emitted before returning
	fmt.Println("prompt error:", err)
	// Output:
	// retry 1/3 in 10 ms: 503 Service Unavailable
	// retry ended, success: true
	// prompt error: <nil>
}
