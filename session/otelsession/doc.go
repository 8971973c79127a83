// Package otelsession makes OpenTelemetry traces and metrics of sessions:
// a span for every turn, under the span of the caller of Prompt, with a
// child span for each run, each backoff wait and each compaction; and
// counters of retries, retry chains and compactions, the backoff waits
// and the tokens used. One option turns it on:
//
//	obs, err := otelsession.New()
//	...
//	s, err := session.New(agent, session.WithObserver(obs))
//
// It is a session.Observer, so the core packages import no OpenTelemetry.
// Attributes follow the OpenTelemetry semantic conventions for generative
// AI where they apply (gen_ai.system, gen_ai.request.model,
// gen_ai.usage.input_tokens, ...) and error.type carries the classifier's
// verdict; docs/observability.md lists every span, attribute and metric.
//
// It is not an exporter: the program sets up its TracerProvider and
// MeterProvider (the global ones by default) and their exporters.
package otelsession
