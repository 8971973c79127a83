package policy_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// fuzzHistory is the history the fuzzed snapshots are resumed on: two
// turns, the last answer over the compaction threshold.
func fuzzHistory(f *testing.F) ([]transcript.Entry, []policy.Snapshot) {
	cfg := policy.DefaultConfig()
	cfg.Compaction.KeepRecentTokens = 5
	d := newDriver(f, cfg)
	d.e.SetCompactionEnabled(false)
	var snaps []policy.Snapshot
	for _, m := range []transcript.Message{answer(transcript.StopReasonStop, "a first answer of some length"), big()} {
		effects, err := d.e.Prompt(t0, "question")
		if err != nil {
			f.Fatal(err)
		}
		d.feed(effects)
		snaps = append(snaps, d.e.Snapshot()) // a run in flight
		d.answerRun(t0, m, 0)
	}
	d.e.SetCompactionEnabled(true)
	snaps = append(snaps, d.e.Snapshot()) // idle
	return d.history, snaps
}

// FuzzRestoreSnapshot reads arbitrary bytes as a snapshot's JSON and restores
// it on a fixed history: it never panics; a snapshot that does not read
// back is refused with ErrSnapshot (or, for bytes that are not JSON, a
// syntax error); one Restore refuses is refused with ErrSnapshot; and one it
// resumes gives an engine that works: it comes to rest, takes a prompt,
// sends it and settles the turn, and its own snapshot resumes. Run it
// longer with:
// go test ./policy -run '^$' -fuzz FuzzRestoreSnapshot -fuzztime 3m -parallel 1
func FuzzRestoreSnapshot(f *testing.F) {
	history, snaps := fuzzHistory(f)
	for _, s := range snaps {
		data, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"version":1,"sessionId":"s","config":{"retry":{"enabled":true,"maxRetries":3,"baseDelayMs":2000,"maxDelayMs":60000,` +
		`"jitter":0,"honorRetryAfter":true,"rules":"extended"},"compaction":{"enabled":true,"reserveTokens":16384,"keepRecentTokens":5}},` +
		`"state":"backoff","attempt":2,"history":4,"deadline":"2026-01-01T00:00:02Z","turn":true,"tickets":7}`))
	f.Add([]byte(`{"version":1,"sessionId":"s","config":{"retry":{"enabled":true,"maxRetries":3,"baseDelayMs":2000,"maxDelayMs":60000,` +
		`"jitter":0,"honorRetryAfter":true,"rules":"extended"},"compaction":{"enabled":true,"reserveTokens":16384,"keepRecentTokens":5}},` +
		`"state":"compacting","attempt":0,"history":4,"inFlight":"compaction","compaction":"threshold","compactionCheck":true,"turn":true,` +
		`"prompt":{"id":"user-9","role":"user","content":"again","timestamp":1},"tickets":3}`))
	for _, tail := range []string{
		`"state":"continuing","attempt":1,"history":4,"inFlight":"continuation","turn":true,"tickets":5}`,
		`"state":"idle","attempt":0,"history":4,"inFlight":"continuation","aborted":true,"turn":true,"tickets":5}`,
		`"state":"compacting","attempt":0,"episodeCompacted":true,"history":4,"inFlight":"compaction","compaction":"overflow","turn":true,"tickets":4}`,
		`"state":"idle","attempt":0,"history":4,"inFlight":"run","turn":true,"tickets":2}`,
	} {
		f.Add([]byte(`{"version":1,"sessionId":"s","config":{"retry":{"enabled":true,"maxRetries":3,"baseDelayMs":2000,"maxDelayMs":60000,` +
			`"jitter":0.5,"honorRetryAfter":true,"rules":"seed"},"compaction":{"enabled":true,"reserveTokens":16384,"keepRecentTokens":5}},` + tail))
	}
	f.Add([]byte(`null`))
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var snap policy.Snapshot
		if err := json.Unmarshal(data, &snap); err != nil {
			var syntax *json.SyntaxError
			if !errors.Is(err, policy.ErrSnapshot) && !errors.As(err, &syntax) {
				t.Fatalf("a snapshot that does not read back: %v", err)
			}
			return
		}
		e, effects, err := policy.Restore(policy.Setup{Model: testModel, History: history}, snap, t0, 0.5)
		if err != nil {
			if !errors.Is(err, policy.ErrSnapshot) {
				t.Fatalf("refused without ErrSnapshot: %v", err)
			}
			return
		}
		w := newWalker(e, history, t0)
		if err := w.apply(effects); err != nil {
			t.Fatal(err)
		}
		if err := w.settle(); err != nil {
			t.Fatalf("resumed from %s: %v", data, err)
		}
		again, err := roundTrip(w.e.Snapshot())
		if err != nil {
			t.Fatalf("its own snapshot does not read back: %v", err)
		}
		if _, _, err := policy.Restore(policy.Setup{Model: testModel, History: w.history}, again, w.at, 0); err != nil {
			t.Fatalf("its own snapshot is refused: %v", err)
		}
	})
}
