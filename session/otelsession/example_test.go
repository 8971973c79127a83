package otelsession_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/otelsession"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// A turn whose first call fails with a 503, inside the span of the
// request that prompted it: the spans as they end, each with its parent.
func Example() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())

	agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{
		{StopReason: "error", ErrorMessage: "503 Service Unavailable"},
		{StopReason: "stop", Text: "done"},
	}})
	cfg := policy.DefaultConfig()
	cfg.Retry.BaseDelayMs = 1
	obs, err := otelsession.New(otelsession.WithTracerProvider(tp))
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithConfig(cfg),
		session.WithObserver(obs))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	ctx, request := tp.Tracer("app").Start(context.Background(), "handle request")
	if err := s.Prompt(ctx, "hi"); err != nil {
		fmt.Println(err)
	}
	request.End()

	names := map[string]string{}
	for _, sp := range spans.GetSpans() {
		names[sp.SpanContext.SpanID().String()] = sp.Name
	}
	for _, sp := range spans.GetSpans() {
		errorType := ""
		for _, kv := range sp.Attributes {
			if kv.Key == otelsession.KeyErrorType {
				errorType = " error.type=" + kv.Value.AsString()
			}
		}
		fmt.Printf("%s (in %q)%s\n", sp.Name, names[sp.Parent.SpanID().String()], errorType)
	}
	// Output:
	// agentfsm.run (in "agentfsm.turn") error.type=retryable
	// agentfsm.backoff (in "agentfsm.turn") error.type=retryable
	// agentfsm.run (in "agentfsm.turn")
	// agentfsm.turn (in "handle request")
	// handle request (in "")
}
