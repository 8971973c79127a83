package policy_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// The snapshots a release wrote must be read by every release after it: a
// session snapshotted (or continued as new, on Temporal) before an upgrade
// resumes after it. testdata/snapshots/v<N>/ holds snapshots of format
// version N, each written by a real engine with the history it was taken
// on, and the lines the engine restored from it gave, input after input,
// when it was written. The test restores each file of every version and
// requires the same lines: a change to the format or to the decisions
// that would make an open session resume otherwise fails here.
//
// A release that changes the format writes its own directory
// (go test ./policy -run TestSnapshotGoldens -record-snapshots writes
// v<the version Snapshot writes>); the directories of earlier versions are never
// rewritten, since the sessions they stand for are already out there.
var recordSnapshots = flag.Bool("record-snapshots", false, "write testdata/snapshots/v<the version Snapshot writes>/ anew from a real engine (never for a version a release already wrote)")

// writtenVersion is the Version of the snapshots this release writes (and
// the only one it reads), as a new engine's Snapshot gives it.
func writtenVersion(t *testing.T) int {
	t.Helper()
	e, err := policy.New(policy.Setup{SessionID: "version", Model: testModel, Config: policy.DefaultConfig()})
	require.NoError(t, err)
	return e.Snapshot().Version
}

// snapshotGolden is one file of testdata/snapshots.
type snapshotGolden struct {
	// Note says what the engine was doing when its snapshot was taken.
	Note    string             `json:"note"`
	Model   policy.Model       `json:"model"`
	History []transcript.Entry `json:"history"`
	// Snapshot is the snapshot as the engine's release wrote it.
	Snapshot json.RawMessage `json:"snapshot"`
	// At is when it was restored, Draw the jitter's draw it was restored
	// with.
	At   time.Time `json:"at"`
	Draw float64   `json:"draw"`
	// Steps are the restore and the inputs after it, each with the lines
	// its effects read as (story_test.go's player).
	Steps []goldenStep `json:"steps"`
}

type goldenStep struct {
	Input string   `json:"input"`
	Lines []string `json:"lines"`
}

// goldenInput is the input a step names: "fire", "answer:TEXT",
// "error:TEXT", "summary:TEXT", "prompt:TEXT".
func goldenInput(name string) (input, error) {
	kind, arg, _ := strings.Cut(name, ":")
	switch kind {
	case "fire":
		return fire(), nil
	case "answer":
		return reply(okAnswer(arg)), nil
	case "error":
		return reply(errorAnswer(arg)), nil
	case "summary":
		return summarized(arg), nil
	case "prompt":
		return promptIn(arg), nil
	}
	return nil, fmt.Errorf("unknown input %q", name)
}

// goldenStory is how a golden file is made: a story played on a new engine
// up to the moment of the snapshot, then the inputs the restored engine
// is given.
type goldenStory struct {
	name, note string
	setup      func(*policy.Setup)
	before     []input
	after      []string
}

var goldenStories = []goldenStory{
	{
		name: "backoff", note: "a retry chain in its first backoff (503 on the first call), restored before the deadline",
		before: []input{promptIn("summarize the repository"), reply(errorAnswer("503 Service Unavailable"))},
		after:  []string{"fire", "error:overloaded_error: Overloaded", "fire", "answer:Here is the summary."},
	},
	{
		name: "compaction", note: "an overflow's compaction in flight (its summary not yet written), restored at once",
		setup: smallKeep,
		before: []input{promptIn("first question, long enough to matter"), reply(okAnswer("first answer")),
			promptIn("second question"), reply(errorAnswer("prompt is too long: 213462 tokens > 200000 maximum"))},
		after: []string{"prompt:try again", "summary:the story so far", "answer:Fits now."},
	},
}

// playGolden restores g's snapshot and plays its steps, returning the
// lines of each.
func playGolden(t *testing.T, g snapshotGolden) []goldenStep {
	t.Helper()
	var snap policy.Snapshot
	require.NoError(t, json.Unmarshal(g.Snapshot, &snap), "the snapshot decodes")
	e, effects, err := policy.Restore(policy.Setup{Model: g.Model, History: g.History}, snap, g.At, g.Draw)
	require.NoError(t, err, "the snapshot restores")
	p := &player{t: t, e: e, now: g.At}
	steps := []goldenStep{{Input: "restore", Lines: p.lines(effects)}}
	for _, st := range g.Steps[min(1, len(g.Steps)):] {
		in, err := goldenInput(st.Input)
		require.NoError(t, err)
		steps = append(steps, goldenStep{Input: st.Input, Lines: in(p)})
	}
	return steps
}

func TestSnapshotGoldens(t *testing.T) {
	if *recordSnapshots {
		writeSnapshotGoldens(t)
	}
	dirs, err := filepath.Glob(filepath.Join("testdata", "snapshots", "v*"))
	require.NoError(t, err)
	require.Contains(t, dirs, filepath.Join("testdata", "snapshots", fmt.Sprint("v", writtenVersion(t))),
		"this release's snapshot format has its goldens (-record-snapshots)")
	files := 0
	for _, dir := range dirs {
		paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
		require.NoError(t, err)
		require.NotEmpty(t, paths, "%s holds no snapshot", dir)
		for _, path := range paths {
			files++
			t.Run(filepath.Base(dir)+"/"+filepath.Base(path), func(t *testing.T) {
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				var g snapshotGolden
				require.NoError(t, json.Unmarshal(data, &g))
				require.NotEmpty(t, g.Steps)
				require.Equal(t, g.Steps, playGolden(t, g), "%s: the restored engine decides as it did when the file was written", path)
			})
		}
	}
	require.GreaterOrEqual(t, files, len(goldenStories))
}

// writeSnapshotGoldens plays each golden story on a real engine, takes its
// snapshot, restores it and writes the file of this release's version.
func writeSnapshotGoldens(t *testing.T) {
	dir := filepath.Join("testdata", "snapshots", fmt.Sprint("v", writtenVersion(t)))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, s := range goldenStories {
		set := policy.Setup{SessionID: "golden-" + s.name, Model: testModel, Config: policy.DefaultConfig()}
		if s.setup != nil {
			s.setup(&set)
		}
		e, err := policy.New(set)
		require.NoError(t, err)
		p := &player{t: t, e: e, now: t0}
		for _, in := range s.before {
			in(p)
		}
		snap, err := json.MarshalIndent(e.Snapshot(), "  ", "  ")
		require.NoError(t, err)
		g := snapshotGolden{Note: s.note, Model: testModel, History: p.history, Snapshot: snap,
			At: p.now.Add(time.Second), Draw: 0.5, Steps: []goldenStep{{Input: "restore"}}}
		for _, a := range s.after {
			g.Steps = append(g.Steps, goldenStep{Input: a})
		}
		g.Steps = playGolden(t, g)
		data, err := json.MarshalIndent(g, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, s.name+".json"), append(data, '\n'), 0o644))
	}
}
