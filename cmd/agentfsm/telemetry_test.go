package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/session/eventlog"
	"github.com/agentfsm/agentfsm/session/rpc"
)

// TestLogLevelFlag: a bad level is a usage error naming the flag; without
// the flag, nothing is logged.
func TestLogLevelFlag(t *testing.T) {
	code, _, errOut := runCmd("", "rpc", "--log-level", "loud")
	assert.Equal(t, 2, code)
	assert.Equal(t, "agentfsm rpc: --log-level \"loud\": want off, error, warn, info, debug or trace\n", errOut)
	code, _, errOut = runCmd("", "chat", "--provider", "anthropic", "--log-level", "loud", "hi")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--log-level \"loud\"")

	script := writeFile(t, "s.json", `{"calls":[{"stopReason":"error","errorMessage":"503 Service Unavailable"},{"stopReason":"stop","text":"ok"}]}`)
	settings := writeFile(t, "settings.json", `{"retry":{"baseDelayMs":1}}`)
	for _, level := range []string{"off", "debug"} {
		var stderr syncBuffer
		args := []string{"rpc", "--script", script, "--settings", settings}
		if level != "off" {
			args = append(args, "--log-level", level)
		}
		ctx := guard(t)
		c, err := rpc.Start(binary(t), &stderr, args...)
		require.NoError(t, err)
		require.NoError(t, c.Prompt(ctx, "hi"))
		require.NoError(t, c.WaitForIdle(ctx))
		require.NoError(t, c.Close())
		if level == "off" {
			assert.Empty(t, stderr.String())
			continue
		}
		assert.Contains(t, stderr.String(), "level=DEBUG msg=state_change")
		assert.Contains(t, stderr.String(), "level=WARN msg=auto_retry_start")
		assert.Contains(t, stderr.String(), "level=INFO msg=turn_settled")
	}
}

// TestExportWanted: any of the standard endpoint variables turns the export
// on, OTEL_SDK_DISABLED=true turns it off.
func TestExportWanted(t *testing.T) {
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) { v, ok := kv[name]; return v, ok }
	}
	assert.False(t, exportWanted(env(nil)))
	assert.False(t, exportWanted(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ""})))
	for _, name := range otlpEndpoints {
		assert.True(t, exportWanted(env(map[string]string{name: "http://collector:4318"})), name)
		assert.False(t, exportWanted(env(map[string]string{name: "http://collector:4318", "OTEL_SDK_DISABLED": "TRUE"})), name)
	}
}

// TestTraceLevelName: the finest level reads TRACE.
func TestTraceLevelName(t *testing.T) {
	var out strings.Builder
	l := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: eventlog.LevelTrace, ReplaceAttr: traceLevel}))
	l.Log(context.Background(), eventlog.LevelTrace, "message_update")
	l.Debug("state_change")
	assert.Contains(t, out.String(), "level=TRACE msg=message_update")
	assert.Contains(t, out.String(), "level=DEBUG msg=state_change")
}
