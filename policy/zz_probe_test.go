package policy_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
)

func TestZZProbeLongChain(t *testing.T) {
	cfg := policy.PatientConfig()
		cfg.Retry.WaitForReset = true
	e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	p := &player{t: t, e: e, now: t0}
	promptIn("hi")(p)
	var ms0, ms1 runtime.MemStats
	began := time.Now()
	for i := 0; i < 100000; i++ {
		text := "503 Service Unavailable"
		if true {
			text = "usage limit reached, retry-after: 1"
		}
		m := errorAnswer(text)
		m.ID = "" 
		var effects []policy.Effect
		for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: m}, events.MessageEnd{Message: m}, events.AgentEnd{}} {
			effects = append(effects, p.e.RunEvent(p.now, p.run, ev)...)
		}
		effects = append(effects, p.e.RunReturned(p.now, p.run, policy.RunReturn{})...)
		p.lines(effects)
		p.history = nil
		if i == 1000 {
			runtime.GC()
			runtime.ReadMemStats(&ms0)
		}
		p.now = p.deadline.Add(100*time.Millisecond)
		p.lines(p.e.TimerFired(p.now, p.timer))
		if i%20000 == 0 {
			t.Log(i, p.e.Status().Attempt, p.deadline.Sub(p.now))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	st := p.e.Status()
	t.Logf("attempt %d state %s heap %d -> %d took %s now %s", st.Attempt, st.State, ms0.HeapAlloc, ms1.HeapAlloc, time.Since(began), p.now)
	snap := p.e.Snapshot()
	t.Logf("%+v", snap.Attempt)
}
