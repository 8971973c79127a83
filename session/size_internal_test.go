package session

import (
	"context"
	"testing"
	"unsafe"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
)

// TestCoreSize: a session's core fits in 512 bytes (a size class of Go's
// allocator), since each session waiting out a backoff keeps one
// (TestWaitingSessionMemory, docs/performance.md, "Sessions at scale").
// What most sessions leave at its default is kept behind one pointer
// shared by those sessions (settings), what only New needs behind one
// that New lets go of (building), and the value a callback calls through
// marks the loop's by a pointer, not a flag of its own.
func TestCoreSize(t *testing.T) {
	if got := unsafe.Sizeof(core{}); got > 512 {
		t.Fatalf("a session's core takes %d bytes, more than 512", got)
	}
	if got := unsafe.Sizeof(Session{}); got > 16 {
		t.Fatalf("a Session value takes %d bytes, more than 16", got)
	}
}

// TestDefaultSettingsShared: a session given none of the options that
// change its settings shares the defaults, and one given such an option
// gets settings of its own, leaving the defaults as they were.
func TestDefaultSettingsShared(t *testing.T) {
	plain, err := New(idleAgent{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if plain.settings != &defaultSettings {
		t.Fatal("a session without options has settings of its own")
	}
	random := func() float64 { return 0.5 }
	own, err := New(idleAgent{}, WithRandom(random), WithObserver(idleObserver{}))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if own.settings == &defaultSettings {
		t.Fatal("a session given WithRandom shares the default settings")
	}
	if len(own.observers) != 1 || own.random() != 0.5 {
		t.Fatalf("the options were not kept: %d observers", len(own.observers))
	}
	if defaultSettings.observers != nil || defaultSettings.logger != discardLogger || defaultSettings.creds != nil || defaultSettings.limiter != nil {
		t.Fatal("an option wrote to the default settings")
	}
}

// idleAgent is never run: the sessions above are given no prompt.
type idleAgent struct{}

func (idleAgent) Run(context.Context, RunRequest, func(events.Event)) error { return nil }

type idleObserver struct{}

func (idleObserver) StartTurn(ctx context.Context, _ string, _ policy.Model) context.Context {
	return ctx
}

func (idleObserver) StartRun(ctx context.Context, _ RunRequest) (context.Context, func(error)) {
	return ctx, nil
}

func (idleObserver) Observe(context.Context, events.Event) {}
