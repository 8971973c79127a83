package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/eventlog"
	"github.com/agentfsm/agentfsm/session/otelsession"
)

// telemetry is a subcommand's logs and OpenTelemetry export: --log-level
// logs the session's events on stderr (package eventlog), and the standard
// OTEL_EXPORTER_OTLP_* environment variables export traces and metrics
// over OTLP/HTTP (package otelsession).
type telemetry struct {
	level *string

	logger    *slog.Logger // nil with --log-level off
	tp        *sdktrace.TracerProvider
	mp        *sdkmetric.MeterProvider
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
	ctx := context.Background()
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	spans, err := otlptracehttp.New(ctx)
	if err != nil {
		return fmt.Errorf("OTLP trace exporter: %w", err)
	}
	metrics, err := otlpmetrichttp.New(ctx)
	if err != nil {
		return fmt.Errorf("OTLP metric exporter: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		fmt.Fprintf(env.stderr, "agentfsm: OpenTelemetry: %v\n", err)
	}))
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics)), sdkmetric.WithResource(res))
	obs, err := otelsession.New(otelsession.WithTracerProvider(t.tp), otelsession.WithMeterProvider(t.mp))
	if err != nil {
		return err
	}
	t.observers = []session.Option{session.WithObserver(obs)}
	return nil
}

// exportWanted reports whether the environment asks for an OTLP export and
// does not turn the SDK off. It reads the process's environment, which the
// exporters read (a test's stand-in environment is for provider keys).
func exportWanted(lookup func(string) (string, bool)) bool {
	if v, _ := lookup("OTEL_SDK_DISABLED"); strings.EqualFold(v, "true") {
		return false
	}
	for _, name := range otlpEndpoints {
		if v, ok := lookup(name); ok && v != "" {
			return true
		}
	}
	return false
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
	if t.tp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		otel.Handle(err)
	}
	if err := t.mp.Shutdown(ctx); err != nil {
		otel.Handle(err)
	}
}
