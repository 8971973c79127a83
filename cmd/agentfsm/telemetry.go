package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/eventlog"
)

// telemetry is a subcommand's logs and OpenTelemetry export: --log-level
// logs the session's events on stderr (package eventlog), and the standard
// OTEL_EXPORTER_OTLP_* environment variables export traces and metrics
// over OTLP/HTTP (package otelsession) in a binary built with the build
// tag otlp (telemetry_otlp.go). The exporters import gRPC and its
// generated code even for HTTP, about a third of a build from empty
// caches, so the default binary leaves them out and says so when the
// environment asks for an export (telemetry_nootlp.go).
type telemetry struct {
	level *string

	logger    *slog.Logger // nil with --log-level off
	stop      func()       // flushes and ends the export; nil without one
	observers []session.Option
}

// logLevels are --log-level's values.
var logLevels = map[string]slog.Level{
	"error": slog.LevelError, "warn": slog.LevelWarn, "info": slog.LevelInfo,
	"debug": slog.LevelDebug, "trace": eventlog.LevelTrace,
}

func addTelemetryFlags(fs flagSet) *telemetry {
	return &telemetry{level: fs.String("log-level", "off",
		"log the session's events on stderr at this `level` and above: off, error, warn, info, debug or trace")}
}

// traceLevel names eventlog.LevelTrace TRACE, not DEBUG-4.
func traceLevel(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.LevelKey && len(groups) == 0 {
		if l, ok := a.Value.Any().(slog.Level); ok && l == eventlog.LevelTrace {
			a.Value = slog.StringValue("TRACE")
		}
	}
	return a
}

// otlpEndpoints are the variables that turn the export on.
var otlpEndpoints = []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"}

// start reads the flags and the environment. Its error is a usage error:
// a bad --log-level, or an export the environment asks for that cannot
// be set up.
func (t *telemetry) start(env *environment, service string) error {
	if *t.level != "off" {
		level, ok := logLevels[strings.ToLower(*t.level)]
		if !ok {
			return fmt.Errorf("--log-level %q: want off, error, warn, info, debug or trace", *t.level)
		}
		t.logger = slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: traceLevel}))
	}
	if !exportWanted(os.LookupEnv) {
		return nil
	}
	return t.startExport(env, service)
}

// exportWanted reports whether the environment asks for an OTLP export and
// does not turn the SDK off. It reads the process's environment, which the
// exporters read (a test's stand-in environment is for provider keys).
func exportWanted(lookup func(string) (string, bool)) bool { return wantedBy(lookup) != "" }

// wantedBy is the first of otlpEndpoints that asks for an export, or ""
// when none does or OTEL_SDK_DISABLED is true.
func wantedBy(lookup func(string) (string, bool)) string {
	if v, _ := lookup("OTEL_SDK_DISABLED"); strings.EqualFold(v, "true") {
		return ""
	}
	for _, name := range otlpEndpoints {
		if v, ok := lookup(name); ok && v != "" {
			return name
		}
	}
	return ""
}

// logsTo reports whether the event log is on and w is a terminal.
func (t *telemetry) logsTo(w any) bool { return t.logger != nil && isTerminal(w) }

// options are the session options the telemetry needs: the logger for
// what the session cannot return, and the OpenTelemetry observer.
func (t *telemetry) options() []session.Option {
	var opts []session.Option
	if t.logger != nil {
		opts = append(opts, session.WithLogger(t.logger))
	}
	return append(opts, t.observers...)
}

// attach starts logging s's events.
func (t *telemetry) attach(s *session.Session) {
	if t.logger != nil {
		eventlog.Subscribe(s, t.logger)
	}
}

// shutdown exports what is left, waiting at most a few seconds for the
// collector.
func (t *telemetry) shutdown() {
	if t.stop != nil {
		t.stop()
	}
}
