// Package scenarios is the table of recovery stories that every driver of
// the policy must tell alike: the in-process session (package session) and
// the durable workflow of the temporal module. Each scenario is a script of
// model calls, the prompts sent one after the other, what the user does
// meanwhile, and the session events it must give: the recovery events
// (auto_retry_*, auto_compaction_*, state_change, turn_settled) in their
// wire form (docs/rpc.md), not the agent's own.
package scenarios

import (
	"context"
	"fmt"
	"time"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// Scenario is one story.
type Scenario struct {
	// Name names it, as a test's name and a recorded history's file.
	Name string
	// Prompts are sent one after the other, each once the turn before it
	// settled.
	Prompts []string
	// Calls answer the model calls in order.
	Calls []scripted.Call
	// Credentials, when set, back the session with a credential store
	// holding them.
	Credentials []policy.Credential
	// KeepRecentTokens overrides compaction.keepRecentTokens when set.
	KeepRecentTokens int
	// BaseDelayMs overrides retry.baseDelayMs when set.
	BaseDelayMs int64
	// WaitForReset sets retry.waitForReset: a usage limit whose reset is
	// known waits for it.
	WaitForReset bool
	// AbortAfter, when set, aborts the session this long after the first
	// prompt was sent: during the first backoff (a driver on a real,
	// loaded clock waits for the backoff instead).
	AbortAfter time.Duration
	// Want is the recovery events the whole story gives, one wire line
	// each.
	Want []string
}

// Model is the model every scenario talks to.
var Model = scripted.DefaultModel

// Draw is the random number every retry's jitter is drawn as, so that the
// delays are the same in every driver.
func Draw() float64 { return 0.5 }

// Config returns the settings sc runs under: the defaults with a jitter
// (so the draw matters) and sc's overrides.
func (sc Scenario) Config() policy.Config {
	cfg := policy.DefaultConfig()
	cfg.Retry.Jitter = 0.2
	if sc.BaseDelayMs > 0 {
		cfg.Retry.BaseDelayMs = sc.BaseDelayMs
	}
	if sc.KeepRecentTokens > 0 {
		cfg.Compaction.KeepRecentTokens = sc.KeepRecentTokens
	}
	cfg.Retry.WaitForReset = sc.WaitForReset
	return cfg
}

// Script returns sc's model calls as a script.
func (sc Scenario) Script() scripted.Script {
	return scripted.Script{Model: Model, Calls: append([]scripted.Call(nil), sc.Calls...)}
}

// SessionID is the identity every scenario's session has.
const SessionID = "scenario"

// Recovery returns ev's wire line when it is a recovery event (the events
// Want lists), and false for the agent's own events.
func Recovery(ev events.Event) (string, bool, error) {
	if !RecoveryType(rpc.EventType(ev)) {
		return "", false, nil
	}
	b, err := rpc.MarshalEvent(ev)
	if err != nil {
		return "", false, err
	}
	return string(b), true, nil
}

// RecoveryType reports whether typ, an event's wire type, is one of the
// recovery events Want lists.
func RecoveryType(typ string) bool {
	switch typ {
	case "auto_retry_start", "auto_retry_end", "auto_compaction_start", "auto_compaction_end", "state_change", "turn_settled":
		return true
	}
	return false
}

func errorCall(text string) scripted.Call {
	return scripted.Call{StopReason: "error", ErrorMessage: text}
}

func okCall(text string) scripted.Call {
	return scripted.Call{StopReason: "stop", Text: text}
}

// All returns the scenarios.
func All() []Scenario {
	return []Scenario{
		{
			Name:    "transient",
			Prompts: []string{"summarize the repository"},
			Calls:   []scripted.Call{errorCall("503 Service Unavailable"), errorCall("overloaded_error: Overloaded"), okCall("Here is the summary.")},
			Want: []string{
				`{"type":"state_change","from":"idle","to":"classifying","event":"agent_end"}`,
				`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":1800,"errorMessage":"503 Service Unavailable","errorClass":"retryable","provider":"scripted","model":"scripted-1"}`,
				`{"type":"state_change","from":"classifying","to":"backoff","event":"retry"}`,
				`{"type":"state_change","from":"backoff","to":"continuing","event":"elapsed"}`,
				`{"type":"state_change","from":"continuing","to":"classifying","event":"agent_end"}`,
				`{"type":"auto_retry_start","attempt":2,"maxAttempts":3,"delayMs":3600,"errorMessage":"overloaded_error: Overloaded","errorClass":"retryable","provider":"scripted","model":"scripted-1"}`,
				`{"type":"state_change","from":"classifying","to":"backoff","event":"retry"}`,
				`{"type":"state_change","from":"backoff","to":"continuing","event":"elapsed"}`,
				`{"type":"auto_retry_end","success":true,"attempt":2,"outcome":"recovered"}`,
				`{"type":"state_change","from":"continuing","to":"classifying","event":"agent_end"}`,
				`{"type":"state_change","from":"classifying","to":"idle","event":"accept"}`,
				`{"type":"turn_settled","success":true}`,
			},
		},
		{
			Name:    "exhausted",
			Prompts: []string{"summarize the repository"},
			Calls: []scripted.Call{errorCall("503 Service Unavailable"), errorCall("503 Service Unavailable"),
				errorCall("502 Bad Gateway"), errorCall("503 Service Unavailable")},
			Want: []string{
				`{"type":"state_change","from":"idle","to":"classifying","event":"agent_end"}`,
				`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":1800,"errorMessage":"503 Service Unavailable","errorClass":"retryable","provider":"scripted","model":"scripted-1"}`,
				`{"type":"state_change","from":"classifying","to":"backoff","event":"retry"}`,
				`{"type":"state_change","from":"backoff","to":"continuing","event":"elapsed"}`,
				`{"type":"state_change","from":"continuing","to":"classifying","event":"agent_end"}`,
				`{"type":"auto_retry_start","attempt":2,"maxAttempts":3,"delayMs":3600,"errorMessage":"503 Service Unavailable","errorClass":"retryable","provider":"scripted","model":"scripted-1"}`,
				`{"type":"state_change","from":"classifying","to":"backoff","event":"retry"}`,
				`{"type":"state_change","from":"backoff","to":"continuing","event":"elapsed"}`,
				`{"type":"state_change","from":"continuing","to":"classifying","event":"agent_end"}`,
				`{"type":"auto_retry_start","attempt":3,"maxAttempts":3,"delayMs":7200,"errorMessage":"502 Bad Gateway","errorClass":"retryable","provider":"scripted","model":"scripted-1"}`,
				`{"type":"state_change","from":"classifying","to":"backoff","event":"retry"}`,
				`{"type":"state_change","from":"backoff","to":"continuing","event":"elapsed"}`,
				`{"type":"state_change","from":"continuing","to":"classifying","event":"agent_end"}`,
				`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"503 Service Unavailable","outcome":"exhausted","errorClass":"retryable","limit":"retries"}`,
				`{"type":"state_change","from":"classifying","to":"exhausted","event":"exhaust"}`,
				`{"type":"state_change","from":"exhausted","to":"idle","event":"reset"}`,
				`{"type":"turn_settled","success":false,"error":"session: retries exhausted after 3 attempts: 503 Service Unavailable","code":"exhausted","errorClass":"retryable"}`,
			},
		},
		{
			Name:    "abort-during-wait",
			Prompts: []string{"summarize the repository"},
			Calls:   []scripted.Call{errorCall("529 Overloaded"), okCall("never sent")},
			// The first retry waits 1800 ms.
			AbortAfter: time.Second,
			Want: []string{
				`{"type":"state_change","from":"idle","to":"classifying","event":"agent_end"}`,
				`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":1800,"errorMessage":"529 Overloaded","errorClass":"retryable","provider":"scripted","model":"scripted-1"}`,
				`{"type":"state_change","from":"classifying","to":"backoff","event":"retry"}`,
				`{"type":"auto_retry_end","success":false,"attempt":1,"finalError":"Retry cancelled","outcome":"cancelled"}`,
				`{"type":"state_change","from":"backoff","to":"cancelled","event":"cancel"}`,
				`{"type":"state_change","from":"cancelled","to":"idle","event":"reset"}`,
				`{"type":"turn_settled","success":false,"error":"session: aborted","code":"aborted"}`,
			},
		},
		{
			Name: "overflow",
			Prompts: []string{
				"read the design notes and list the open questions, with the section each comes from",
				"now draft answers to every question",
			},
			Calls: []scripted.Call{okCall("Seven open questions, by section."),
				errorCall("prompt is too long: 213462 tokens > 200000 maximum"), okCall("Here are the drafts.")},
			KeepRecentTokens: 10,
			Want: []string{
				`{"type":"state_change","from":"idle","to":"classifying","event":"agent_end"}`,
				`{"type":"state_change","from":"classifying","to":"idle","event":"accept"}`,
				`{"type":"turn_settled","success":true}`,
				`{"type":"state_change","from":"idle","to":"classifying","event":"agent_end"}`,
				`{"type":"auto_compaction_start","reason":"overflow"}`,
				`{"type":"state_change","from":"classifying","to":"compacting","event":"overflow"}`,
				`{"type":"auto_compaction_end","result":{"summary":"Summary of 1 earlier message","firstKeptEntryId":"call-1","tokensBefore":213462,"tokensAfter":136835},"aborted":false,"willRetry":true}`,
				`{"type":"state_change","from":"compacting","to":"continuing","event":"resume"}`,
				`{"type":"state_change","from":"continuing","to":"classifying","event":"agent_end"}`,
				`{"type":"state_change","from":"classifying","to":"idle","event":"accept"}`,
				`{"type":"turn_settled","success":true}`,
			},
		},
		{
			Name:    "usage-limit",
			Prompts: []string{"summarize the repository"},
			Calls:   []scripted.Call{errorCall("429 usage limit reached for this key; retry-after: 3600"), okCall("Done with the second key.")},
			Credentials: []policy.Credential{
				{ID: "key-a", Provider: Model.Provider, Type: "api_key"},
				{ID: "key-b", Provider: Model.Provider, Type: "api_key"},
			},
			Want: []string{
				`{"type":"state_change","from":"idle","to":"classifying","event":"agent_end"}`,
				`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":0,"errorMessage":"429 usage limit reached for this key; retry-after: 3600","errorClass":"usage_limit","provider":"scripted","model":"scripted-1","credentialId":"key-b"}`,
				`{"type":"state_change","from":"classifying","to":"backoff","event":"retry_now"}`,
				`{"type":"state_change","from":"backoff","to":"continuing","event":"elapsed"}`,
				`{"type":"auto_retry_end","success":true,"attempt":1,"outcome":"recovered"}`,
				`{"type":"state_change","from":"continuing","to":"classifying","event":"agent_end"}`,
				`{"type":"state_change","from":"classifying","to":"idle","event":"accept"}`,
				`{"type":"turn_settled","success":true}`,
			},
		},
	}
}

// Play runs sc on an in-process session and returns the recovery events it
// gave, one wire line each. It sleeps through the backoffs: run it inside a
// testing/synctest bubble.
func (sc Scenario) Play(ctx context.Context) ([]string, error) {
	opts := []session.Option{
		session.WithSessionID(SessionID), session.WithModel(Model), session.WithConfig(sc.Config()),
		session.WithRandom(Draw),
	}
	if len(sc.Credentials) > 0 {
		store, err := credentials.NewMemoryCredentials(nil, sc.Credentials...)
		if err != nil {
			return nil, fmt.Errorf("scenarios: %s: %w", sc.Name, err)
		}
		opts = append(opts, session.WithCredentials(store))
	}
	s, err := session.New(scripted.New(sc.Script()), opts...)
	if err != nil {
		return nil, fmt.Errorf("scenarios: %s: %w", sc.Name, err)
	}
	defer s.Close()
	var lines []string
	var failure error
	s.Subscribe(func(ev events.Event) {
		line, ok, err := Recovery(ev)
		if err != nil && failure == nil {
			failure = err
		}
		if ok {
			lines = append(lines, line)
		}
	})
	for i, p := range sc.Prompts {
		settled, err := s.Send(p)
		if err != nil {
			return nil, fmt.Errorf("scenarios: %s: prompt %d: %w", sc.Name, i+1, err)
		}
		if i == 0 && sc.AbortAfter > 0 {
			time.Sleep(sc.AbortAfter)
			s.Abort()
		}
		select {
		case <-settled:
		case <-ctx.Done():
			return nil, fmt.Errorf("scenarios: %s: prompt %d: %w", sc.Name, i+1, ctx.Err())
		}
	}
	s.Flush()
	return lines, failure
}
