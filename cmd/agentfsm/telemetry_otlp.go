//go:build otlp

package main

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/otelsession"
)

// otlpBuilt reports whether this binary exports over OTLP.
const otlpBuilt = true

// startExport sets up the OTLP/HTTP exporters the standard environment
// variables describe, and the session observer that feeds them. Its error
// is a usage error: an export that cannot be set up.
func (t *telemetry) startExport(env *environment, service string) error {
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
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics)), sdkmetric.WithResource(res))
	obs, err := otelsession.New(otelsession.WithTracerProvider(tp), otelsession.WithMeterProvider(mp))
	if err != nil {
		return err
	}
	t.observers = []session.Option{session.WithObserver(obs)}
	t.stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			otel.Handle(err)
		}
		if err := mp.Shutdown(ctx); err != nil {
			otel.Handle(err)
		}
	}
	return nil
}
