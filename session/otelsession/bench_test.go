package otelsession_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/eventlog"
	"github.com/agentfsm/agentfsm/session/otelsession"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// BenchmarkTurn is one successful turn of one model call on the scripted
// agent: bare, with the event log at debug level (to io.Discard), and with
// the OpenTelemetry observer recording spans (not exported) and metrics.
// The ratios to the bare turn are the cost of observing.
func BenchmarkTurn(b *testing.B) {
	tp := sdktrace.NewTracerProvider()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())
	obs, err := otelsession.New(otelsession.WithTracerProvider(tp), otelsession.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name  string
		opts  []session.Option
		start func(*session.Session) func()
	}{
		{"bare", nil, nil},
		{"eventlog", nil, func(s *session.Session) func() {
			return eventlog.Subscribe(s, slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug})))
		}},
		{"otelsession", []session.Option{session.WithObserver(obs)}, nil},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			// A fresh session every 50 turns, outside the timer: a turn
			// costs more as the context grows.
			var s *session.Session
			stop := func() {}
			open := func() {
				stop()
				if s != nil {
					s.Close()
				}
				agent := scripted.New(scripted.Script{Model: scripted.DefaultModel})
				var err error
				if s, err = session.New(agent, append(c.opts, session.WithModel(scripted.DefaultModel))...); err != nil {
					b.Fatal(err)
				}
				stop = func() {}
				if c.start != nil {
					stop = c.start(s)
				}
			}
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if i%50 == 0 {
					b.StopTimer()
					open()
					b.StartTimer()
				}
				if err := s.Prompt(ctx, "hi"); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			s.Flush()
			stop()
			s.Close()
		})
	}
}
