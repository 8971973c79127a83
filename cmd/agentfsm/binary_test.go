package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/transcript"
)

// These tests build the command and run it as a user or an RPC client
// would: as a separate process over real pipes. They run on the real
// clock, with delays of milliseconds; each has a deadline as a guard, not as
// a speed target.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	// built is when the build of the binary under test ended.
	built time.Time
)

// TestMain removes the binary under test, built once for the package, when
// the tests are over.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		if err := os.RemoveAll(filepath.Dir(binPath)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// binary is the path of the command built for the tests (without -race:
// the tests run it as a user would, and what they check of it is its
// output), built on first use.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentfsm-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "agentfsm")
		out, err := exec.Command("go", "build", "-tags", buildTags(), "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = &buildError{err, string(out)}
		}
		built = time.Now()
	})
	require.NoError(t, buildErr)
	return binPath
}

// buildTags are the build tags of this test binary that change the
// command, so that the binary under test is built as the test was: go test
// -tags svg,otlp tests the full command, go test the default one.
func buildTags() string {
	var tags []string
	if svgBuilt {
		tags = append(tags, "svg")
	}
	if otlpBuilt {
		tags = append(tags, "otlp")
	}
	return strings.Join(tags, ",")
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// guard is the deadline of a test that runs the binary under test. It
// starts once the binary is built, so that the build (minutes on a cold
// cache and a loaded machine) is not charged to whichever test runs first.
func guard(t *testing.T) context.Context {
	t.Helper()
	binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestDemoNonInteractive(t *testing.T) {
	// Its child process waits on the real clock: it waits beside the
	// other tests that do, once the package's sequential tests are done.
	t.Parallel()
	cmd := exec.CommandContext(guard(t), binary(t), "demo", "--base-delay-ms", "400")
	out, err := cmd.Output()
	require.NoError(t, err)
	text := string(out)
	for _, want := range []string{
		"outcome: transient: succeeded, 2 retries",
		"outcome: exhausted: failed: policy: retries exhausted after 3 attempts: 503 Service Unavailable",
		"outcome: usage-limit: succeeded, 1 retries",
		"outcome: overflow: succeeded, 0 retries, 1 compaction(s)",
		"outcome: cancelled: retry cancelled, 1 retries",
		"event  auto_retry_start attempt 1/3, delay 0 ms", // the credential switch
		"view   ⠿ Retrying (1/3) in 0s… (esc to cancel)",
		"view   Retry failed after 1 attempts: Retry cancelled",
		"view   ⠿ Context overflow detected, Auto-compacting… (esc to cancel)",
	} {
		assert.Contains(t, text, want)
	}
	// With no subcommand, the demo is what runs.
	out, err = exec.CommandContext(guard(t), binary(t), "--help").Output()
	require.NoError(t, err)
	for _, sub := range []string{"demo", "rpc", "classify", "diagram"} {
		assert.Contains(t, string(out), sub)
	}
}

const rpcScript = `{"model":{"provider":"scripted","id":"scripted-1","contextWindow":200000},"calls":[
  {"stopReason":"stop","text":"a first answer to compact later"},
  {"stopReason":"error","errorMessage":"503 Service Unavailable"},
  {"stopReason":"stop","text":"done"},
  {"stopReason":"error","errorMessage":"prompt is too long: 213462 tokens > 200000 maximum"},
  {"stopReason":"stop","text":"recovered"}
]}`

func startRPC(t *testing.T, script, settings string, extra ...string) *rpc.Client {
	t.Helper()
	args := append([]string{"rpc", "--script", writeFile(t, "script.json", script), "--settings", writeFile(t, "settings.json", settings)}, extra...)
	c, err := rpc.Start(binary(t), os.Stderr, args...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	return c
}

// events collects the client's events until turn_settled.
func eventsUntilSettled(t *testing.T, ctx context.Context, c *rpc.Client) []rpc.Event {
	t.Helper()
	var got []rpc.Event
	for {
		select {
		case ev, ok := <-c.Events():
			require.True(t, ok, "the event stream ended early")
			got = append(got, ev)
			if ev.Type == "turn_settled" {
				return got
			}
		case <-ctx.Done():
			t.Fatalf("no turn_settled; events so far: %v", got)
		}
	}
}

func eventTypes(evs []rpc.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func TestRPCBinary(t *testing.T) {
	ctx := guard(t)
	c := startRPC(t, rpcScript, `{"retry":{"baseDelayMs":50},"compaction":{"keepRecentTokens":5}}`)

	st, err := c.GetState(ctx)
	require.NoError(t, err)
	assert.Equal(t, rpc.State{SessionID: st.SessionID, Model: policy.Model{Provider: "scripted", ID: "scripted-1", ContextWindow: 200000},
		AutoRetryEnabled: true, AutoCompactionEnabled: true, State: "idle"}, st)
	assert.NotEmpty(t, st.SessionID)

	require.NoError(t, c.Prompt(ctx, "a first question, long enough to be worth compacting"))
	require.NoError(t, c.WaitForIdle(ctx))
	eventsUntilSettled(t, ctx, c)

	// An error, then success: the retry's events in order, with the
	// configured delay.
	require.NoError(t, c.Prompt(ctx, "a second question"))
	require.NoError(t, c.WaitForIdle(ctx))
	evs := eventsUntilSettled(t, ctx, c)
	joined := strings.Join(eventTypes(evs), " ")
	assert.Contains(t, joined, "agent_end state_change auto_retry_start state_change state_change agent_start")
	for _, ev := range evs {
		if ev.Type == "auto_retry_start" {
			v, err := ev.Value()
			require.NoError(t, err)
			e := v.(events.AutoRetryStart)
			assert.Equal(t, int64(50), e.DelayMs)
		}
	}

	// An overflow, recovered: WaitForIdle waits through the compaction and
	// the continuation.
	require.NoError(t, c.Prompt(ctx, "a third question"))
	require.NoError(t, c.WaitForIdle(ctx))
	joined = strings.Join(eventTypes(eventsUntilSettled(t, ctx, c)), " ")
	assert.Contains(t, joined, "auto_compaction_start state_change auto_compaction_end state_change agent_start")

	msgs, err := c.GetMessages(ctx)
	require.NoError(t, err)
	assert.Equal(t, transcript.RoleSummary, msgs[0].Role)

	res, err := c.Compact(ctx, "the numbers")
	require.NoError(t, err)
	assert.Contains(t, res.Summary, "Focus: the numbers")
	_, err = c.Compact(ctx, "")
	require.ErrorContains(t, err, "already compacted")
}

func TestRPCBinaryRetryOffAndAbortRetry(t *testing.T) {
	ctx := guard(t)
	script := `{"calls":[{"stopReason":"error","errorMessage":"503 Service Unavailable"},{"stopReason":"error","errorMessage":"503 Service Unavailable"}]}`
	c := startRPC(t, script, `{"retry":{"baseDelayMs":600000}}`, "--mode", "rpc")

	require.NoError(t, c.SetAutoRetry(ctx, false))
	require.NoError(t, c.Prompt(ctx, "hi"))
	require.ErrorContains(t, c.WaitForIdle(ctx), "503")
	for _, ev := range eventsUntilSettled(t, ctx, c) {
		assert.NotEqual(t, "auto_retry_start", ev.Type)
	}

	require.NoError(t, c.SetAutoRetry(ctx, true))
	require.NoError(t, c.Prompt(ctx, "again"))
	for ev := range c.Events() {
		if ev.Type == "auto_retry_start" {
			break
		}
	}
	st, err := c.GetState(ctx)
	require.NoError(t, err)
	assert.True(t, st.IsRetrying)
	assert.Equal(t, "backoff", st.State)
	require.NoError(t, c.AbortRetry(ctx))
	require.ErrorContains(t, c.WaitForIdle(ctx), "retry cancelled", "well before the 10-minute wait")
	var end events.AutoRetryEnd
	for _, ev := range eventsUntilSettled(t, ctx, c) {
		if ev.Type == "auto_retry_end" {
			v, err := ev.Value()
			require.NoError(t, err)
			end = v.(events.AutoRetryEnd)
		}
	}
	assert.Equal(t, events.AutoRetryEnd{Success: false, Attempt: 1, FinalError: "Retry cancelled", Outcome: events.RetryCancelled}, end)
}

// TestRPCBinaryBadInput drives the binary over raw pipes with bad lines and
// then closes stdin in the middle of a turn, which then settles.
func TestRPCBinaryBadInput(t *testing.T) {
	ctx := guard(t)
	script := writeFile(t, "s.json", `{"calls":[{"stopReason":"error","errorMessage":"503 Service Unavailable"}]}`)
	cmd := exec.CommandContext(ctx, binary(t), "--mode", "rpc", "--script", script)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	out := bufio.NewReader(stdout)
	next := func() map[string]any {
		line, err := out.ReadString('\n')
		require.NoError(t, err)
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &obj), "stdout carries JSON lines only: %q", line)
		return obj
	}
	lines := []string{
		"not json\n",
		"[1]\n",
		`{"id":"a","type":"warp"}` + "\n",
		`{"id":"b","type":"prompt"}` + "\n",
		`{"id":"c","type":"set_auto_compaction","enabled":1}` + "\n",
		"\xff\xfe\n",
		`{"id":"d","type":"get_state"}` + "\r\n",
		`{"id":"big","type":"set_auto_retry","enabled":true,"pad":"` + strings.Repeat("y", 16<<20) + `"}` + "\n",
	}
	for _, l := range lines {
		_, err := io.WriteString(stdin, l)
		require.NoError(t, err)
	}
	wantOK := []bool{false, false, false, false, false, false, true, true}
	for i, ok := range wantOK {
		obj := next()
		assert.Equal(t, "response", obj["type"], "line %d", i)
		assert.Equal(t, ok, obj["success"], "line %d: %v", i, obj)
	}
	// A turn in flight, then stdin closes: the turn settles (its retry,
	// after the default 2 s, succeeds), its events go out, exit 0.
	_, err = io.WriteString(stdin, `{"id":"p","type":"prompt","message":"hi"}`+"\n")
	require.NoError(t, err)
	for obj := next(); obj["type"] != "auto_retry_start"; obj = next() {
	}
	require.NoError(t, stdin.Close())
	rest, err := io.ReadAll(out)
	require.NoError(t, err)
	assert.Contains(t, string(rest), `"outcome":"recovered"`)
	assert.Contains(t, string(rest), `"type":"turn_settled","success":true`)
	require.NoError(t, cmd.Wait(), "a clean exit 0; stderr: %s", stderr.String())
	assert.NotContains(t, stderr.String(), "goroutine")
}

// --settings reference runs the reference agent's policy exactly: its seed
// rules do not retry a bare ECONNRESET, which the defaults retry. Issue
// item 4.
func TestRPCSettingsReference(t *testing.T) {
	script := writeFile(t, "script.json", `{"calls":[{"stopReason":"error","errorMessage":"read ECONNRESET"},{"stopReason":"stop","text":"ok"}]}`)
	for _, c := range []struct {
		name    string
		args    []string
		retried bool
	}{
		{"the defaults", nil, true},
		{"the reference", []string{"--settings", "reference"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := guard(t)
			cl, err := rpc.Start(binary(t), os.Stderr, append([]string{"rpc", "--script", script}, c.args...)...)
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, cl.Close()) })
			require.NoError(t, cl.Prompt(ctx, "hi"))
			waitErr := cl.WaitForIdle(ctx)
			retried := false
			for _, ev := range eventsUntilSettled(t, ctx, cl) {
				retried = retried || ev.Type == "auto_retry_start"
			}
			assert.Equal(t, c.retried, retried)
			if c.retried {
				assert.NoError(t, waitErr)
			} else {
				assert.ErrorContains(t, waitErr, "ECONNRESET")
			}
		})
	}
}

func TestLoadSettings(t *testing.T) {
	set, err := loadSettings("")
	require.NoError(t, err)
	assert.Equal(t, policy.DefaultConfig(), set.config)
	set, err = loadSettings("reference")
	require.NoError(t, err)
	assert.Equal(t, policy.ReferenceConfig(), set.config)
	// A file that happens to be called reference is reached by its path.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "reference"), []byte(`{"retry":{"maxRetries":7}}`), 0o600))
	set, err = loadSettings(filepath.Join(dir, "reference"))
	require.NoError(t, err)
	assert.Equal(t, 7, set.config.Retry.MaxRetries)
	assert.Equal(t, policy.DefaultConfig().Retry.Rules, set.config.Retry.Rules, "a file's settings lie over the defaults")

	// Issue 24 §1: "patient" names the preset for unattended runs, and a
	// file of that name is still reached by its path.
	set, err = loadSettings("patient")
	require.NoError(t, err)
	assert.Equal(t, policy.PatientConfig(), set.config)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "patient"), []byte(`{"retry":{"maxRetries":-1,"maxElapsedMs":5000}}`), 0o600))
	set, err = loadSettings(filepath.Join(dir, "patient"))
	require.NoError(t, err)
	assert.Equal(t, int64(5000), set.config.Retry.MaxElapsedMs)
	assert.Equal(t, policy.DefaultConfig().Retry.MaxDelayMs, set.config.Retry.MaxDelayMs)

	// Issue 24 §1: a chain bound by neither limit, and a bad budget, are
	// refused by name.
	for file, says := range map[string]string{
		`{"retry":{"maxRetries":-1}}`:                     "retry.maxRetries -1 (no count limit) needs a time budget: retry.maxElapsedMs above 0",
		`{"retry":{"maxRetries":-1,"maxElapsedMs":0}}`:    "retry.maxRetries -1 (no count limit) needs a time budget",
		`{"retry":{"maxElapsedMs":-5}}`:                   "retry.maxElapsedMs must not be negative, got -5",
		`{"retry":{"maxElapsedMs":"30m"}}`:                "retry.maxElapsedMs has the wrong type",
		`{"retry":{"maxRetries":-3,"maxElapsedMs":1000}}`: "retry.maxRetries must be -1 (no count limit) or more, got -3",
	} {
		path := filepath.Join(dir, "bad.json")
		require.NoError(t, os.WriteFile(path, []byte(file), 0o600))
		_, err := loadSettings(path)
		require.Error(t, err, file)
		assert.Contains(t, err.Error(), "--settings "+path+": policy: invalid settings: "+says, file)
	}
}

func TestRPCFlagsAndFiles(t *testing.T) {
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"rpc", "--mode", "tui"}, `unknown --mode "tui"`},
		{[]string{"rpc", "--script", "/nonexistent/s.json"}, "--script"},
		{[]string{"rpc", "--script", writeFile(t, "bad.json", `{"calls":[{"stopReason":"boom"}]}`)}, `calls[0].stopReason "boom"`},
		{[]string{"rpc", "--settings", writeFile(t, "bad.json", `{"retry":{"maxRetry":1}}`)}, `unknown key "retry.maxRetry"`},
		{[]string{"rpc", "--settings", writeFile(t, "bad2.json", `{"retry":{"jitter":3}}`)}, "retry.jitter"},
	}
	for _, c := range cases {
		code, _, errOut := runCmd("", c.args...)
		assert.Equal(t, 2, code, c.args)
		assert.Contains(t, errOut, c.says, c.args)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
	}
}

// TestInteractiveDemoUnderTmux runs scripts/demo-walkthrough.sh: the demo in
// a real terminal, Esc pressed during the countdown.
func TestInteractiveDemoUnderTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (.ci/run installs it)")
	}
	out, err := exec.CommandContext(guard(t), "../../scripts/demo-walkthrough.sh", binary(t)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "demo-walkthrough: ok")
}

// TestDemoOnDevNullPlaysPlain: with stdin and stdout on /dev/null, character
// devices that are not terminals (cron, nohup, "> /dev/null"), the demo plays
// its plain lines and exits 0 instead of starting the terminal view.
// Issue item 17.
func TestDemoOnDevNullPlaysPlain(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	require.NoError(t, err)
	defer null.Close()
	for _, args := range [][]string{{"demo"}, {}} {
		args = append(args, "--scenario", "transient", "--base-delay-ms", "0")
		cmd := exec.CommandContext(guard(t), binary(t), args...)
		cmd.Stdin, cmd.Stdout = null, null
		var stderr strings.Builder
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Run(), "args %q: exit 0; stderr: %s", args, stderr.String())
		assert.Empty(t, stderr.String(), args)
	}
}

// TestRPCBinarySignalAbortsTurn: SIGTERM, like SIGINT, ends the server in
// the middle of a turn as the end of stdin does: the turn is aborted, its
// events and turn_settled go out, and the server exits 0 with stdin still
// open. Issue item 27.
func TestRPCBinarySignalAbortsTurn(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx := guard(t)
			script := writeFile(t, "s.json", `{"calls":[{"stopReason":"stop","text":"never","latencyMs":600000}]}`)
			cmd := exec.CommandContext(ctx, binary(t), "rpc", "--script", script)
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			defer stdin.Close()
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			_, err = io.WriteString(stdin, `{"id":"p","type":"prompt","message":"hi"}`+"\n")
			require.NoError(t, err)
			out := bufio.NewReader(stdout)
			for {
				line, err := out.ReadString('\n')
				require.NoError(t, err, "no message_start")
				if strings.Contains(line, `"type":"message_start"`) {
					break
				}
			}
			require.NoError(t, cmd.Process.Signal(sig))
			rest, err := io.ReadAll(out)
			require.NoError(t, err)
			for _, want := range []string{`"stopReason":"aborted"`, `"type":"agent_end"`, `"type":"turn_settled","success":false`} {
				assert.Contains(t, string(rest), want)
			}
			require.NoError(t, cmd.Wait(), "a clean exit 0; stderr: %s", stderr.String())
		})
	}
}

// TestRPCBinaryStdoutFull: with stdout on /dev/full every write fails: the
// server stops at the first, with stdin still open, and exits 1 naming
// the error. Issue item 27.
func TestRPCBinaryStdoutFull(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	defer full.Close()
	cmd := exec.CommandContext(guard(t), binary(t), "rpc")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	cmd.Stdout = full
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	_, err = io.WriteString(stdin, `{"id":"s","type":"get_state"}`+"\n")
	require.NoError(t, err)
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stderr: %s", stderr.String())
	assert.Equal(t, 1, exit.ExitCode())
	assert.Equal(t, "agentfsm rpc: writing output: write /dev/stdout: no space left on device\n", stderr.String())
}

// TestRPCBinaryExampleOverflowScript runs the example script docs/rpc.md
// describes (docs/examples/overflow.script.json) through "agentfsm rpc
// --script", with the default settings (issue 23 item 6): after two short
// turns the third overflows ("210345 tokens > 200000 maximum"), and the
// session compacts and continues, where it used to fail with "nothing to
// compact" unless keepRecentTokens was tuned down.
func TestRPCBinaryExampleOverflowScript(t *testing.T) {
	ctx := guard(t)
	c, err := rpc.Start(binary(t), os.Stderr, "rpc", "--script", filepath.Join("..", "..", "docs", "examples", "overflow.script.json"))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })

	for _, p := range []string{"where are the tests", "what does cut.go do"} {
		require.NoError(t, c.Prompt(ctx, p))
		require.NoError(t, c.WaitForIdle(ctx))
		eventsUntilSettled(t, ctx, c)
	}
	require.NoError(t, c.Prompt(ctx, "and compact.go"))
	require.NoError(t, c.WaitForIdle(ctx), "the overflow is recovered")
	var end *events.AutoCompactionEnd
	for _, ev := range eventsUntilSettled(t, ctx, c) {
		if ev.Type == "auto_compaction_end" {
			v, err := ev.Value()
			require.NoError(t, err)
			e := v.(events.AutoCompactionEnd)
			end = &e
		}
	}
	require.NotNil(t, end, "the overflow starts a compaction")
	require.NotNil(t, end.Result, "the compaction has a result: %s", end.ErrorMessage)
	assert.True(t, end.WillRetry)
	assert.Equal(t, 210345, end.Result.TokensBefore, "the provider's count of the request that overflowed")
	// The digest, cut to the room the overflow's count leaves it: the
	// script's few short messages are 210,345 tokens by that count.
	assert.True(t, strings.HasPrefix(end.Result.Summary, "Summary of "), end.Result.Summary)

	msgs, err := c.GetMessages(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, msgs)
	assert.Equal(t, transcript.RoleSummary, msgs[0].Role)
	last := msgs[len(msgs)-1]
	assert.Equal(t, transcript.RoleAssistant, last.Role)
	assert.Equal(t, "Continuing after the compaction.", last.Text(), "the continuation's answer")
	st, err := c.GetState(ctx)
	require.NoError(t, err)
	require.NotNil(t, st.LastCompaction)
	assert.Equal(t, transcript.ReasonOverflow, st.LastCompaction.Reason)
}

// TestRPCBinaryPipedFileSettles: a file of commands piped into rpc is
// served to its end: the end of input lets the turn in flight settle, its
// retry included, and its events go out before rpc exits 0. Issue 26
// item 4.
func TestRPCBinaryPipedFileSettles(t *testing.T) {
	script := `{"calls":[{"stopReason":"error","errorMessage":"503 Service Unavailable"},{"stopReason":"stop","text":"answered after the retry","latencyMs":100}]}`
	commands := writeFile(t, "commands.jsonl", `{"id":"1","type":"set_auto_retry","enabled":true}`+"\n"+`{"id":"2","type":"prompt","message":"hi"}`+"\n")
	in, err := os.Open(commands)
	require.NoError(t, err)
	defer in.Close()
	cmd := exec.CommandContext(guard(t), binary(t), "rpc", "--script", writeFile(t, "script.json", script),
		"--settings", writeFile(t, "settings.json", `{"retry":{"baseDelayMs":200}}`))
	cmd.Stdin = in
	out, err := cmd.Output()
	require.NoError(t, err, "exit 0")
	var types []string
	var settled map[string]any
	for line := range strings.Lines(string(out)) {
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &obj), line)
		types = append(types, obj["type"].(string))
		if obj["type"] == "turn_settled" {
			settled = obj
		}
	}
	joined := strings.Join(types, " ")
	assert.Contains(t, joined, "auto_retry_start")
	assert.Contains(t, joined, "auto_retry_end")
	require.NotNil(t, settled, "the turn settled before rpc exited: %s", joined)
	assert.Equal(t, true, settled["success"], "not aborted at the end of input: %v", settled)
	assert.Equal(t, "turn_settled", types[len(types)-1], "its turn_settled is the last line")
	assert.Contains(t, string(out), "answered after the retry")
}
