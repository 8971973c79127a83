package otelsession

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/wiretext"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/transcript"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/agentfsm/agentfsm/session/otelsession"

// The span names.
const (
	SpanTurn       = "agentfsm.turn"
	SpanRun        = "agentfsm.run"
	SpanBackoff    = "agentfsm.backoff"
	SpanCompaction = "agentfsm.compaction"
)

// The metric names.
const (
	MetricRetries         = "agentfsm.retries"
	MetricRetryChains     = "agentfsm.retry.chains"
	MetricBackoffDuration = "agentfsm.backoff.duration"
	MetricCompactions     = "agentfsm.compactions"
	MetricTokenUsage      = "gen_ai.client.token.usage"
	// MetricSharedLimitWaits counts the waits on a limit shared by
	// sessions (shared_limit_wait), by key and reason.
	MetricSharedLimitWaits = "agentfsm.shared_limit.waits"
)

// The attribute keys: the semantic conventions' where they apply, this
// package's (agentfsm.*) for the rest.
const (
	KeyConversation     = attribute.Key("gen_ai.conversation.id")
	KeySystem           = attribute.Key("gen_ai.system")
	KeyProviderName     = attribute.Key("gen_ai.provider.name")
	KeyOperation        = attribute.Key("gen_ai.operation.name")
	KeyRequestModel     = attribute.Key("gen_ai.request.model")
	KeyResponseModel    = attribute.Key("gen_ai.response.model")
	KeyFinishReasons    = attribute.Key("gen_ai.response.finish_reasons")
	KeyInputTokens      = attribute.Key("gen_ai.usage.input_tokens")
	KeyOutputTokens     = attribute.Key("gen_ai.usage.output_tokens")
	KeyTokenType        = attribute.Key("gen_ai.token.type")
	KeyErrorType        = attribute.Key("error.type")
	KeyTurnRetries      = attribute.Key("agentfsm.turn.retries")
	KeyTurnOutcome      = attribute.Key("agentfsm.turn.outcome")
	KeyContinuation     = attribute.Key("agentfsm.run.continuation")
	KeyAttempt          = attribute.Key("agentfsm.retry.attempt")
	KeyMaxAttempts      = attribute.Key("agentfsm.retry.max_attempts")
	KeyDelay            = attribute.Key("agentfsm.retry.delay_ms")
	KeyRetryOutcome     = attribute.Key("agentfsm.retry.outcome")
	KeyCredential       = attribute.Key("agentfsm.credential.id")
	KeyBackoffOutcome   = attribute.Key("agentfsm.backoff.outcome")
	KeyReason           = attribute.Key("agentfsm.compaction.reason")
	KeyCompactOutcome   = attribute.Key("agentfsm.compaction.outcome")
	KeyTokensBefore     = attribute.Key("agentfsm.compaction.tokens_before")
	KeyTokensAfter      = attribute.Key("agentfsm.compaction.tokens_after")
	KeyCompactWillRetry = attribute.Key("agentfsm.compaction.will_retry")
	KeySharedLimitKey   = attribute.Key("agentfsm.shared_limit.key")
	KeySharedLimitWhy   = attribute.Key("agentfsm.shared_limit.reason")
)

// Observer is a session.Observer that makes spans and metrics. One
// Observer can serve any number of sessions at once, once each; several
// Observers (with other providers) can serve one session.
type Observer struct {
	tracer trace.Tracer

	retries     metric.Int64Counter
	chains      metric.Int64Counter
	backoff     metric.Float64Histogram
	compactions metric.Int64Counter
	tokens      metric.Int64Histogram
	sharedWaits metric.Int64Counter
}

var _ session.Observer = (*Observer)(nil)

// Option configures New. An option given nil is refused: New fails with
// an error that names it. To keep a default, leave the option out.
type Option func(*options) error

type options struct {
	tp trace.TracerProvider
	mp metric.MeterProvider
}

// WithTracerProvider sets where the spans go; the default is the global
// TracerProvider (otel.GetTracerProvider). A nil tp makes New fail, and so
// does a nil pointer in it (a *sdktrace.TracerProvider never set).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		if err := refuseNil(tp, "TracerProvider"); err != nil {
			return err
		}
		o.tp = tp
		return nil
	}
}

// WithMeterProvider sets where the metrics go; the default is the global
// MeterProvider (otel.GetMeterProvider). A nil mp makes New fail, and so
// does a nil pointer in it.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) error {
		if err := refuseNil(mp, "MeterProvider"); err != nil {
			return err
		}
		o.mp = mp
		return nil
	}
}

// refuseNil returns the error for a nil v: a nil interface, or a nil
// pointer or func in it, which the provider's methods would dereference
// in New; the error names what v is for, and the type of the nil.
func refuseNil(v any, what string) error {
	if v == nil {
		return fmt.Errorf("otelsession: nil %s", what)
	}
	if rv := reflect.ValueOf(v); (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Func) && rv.IsNil() {
		return fmt.Errorf("otelsession: nil %s (%T)", what, v)
	}
	return nil
}

// New returns an Observer, or the error of an invalid option. An instrument the meter cannot make is reported
// to otel.Handle, as OpenTelemetry's own instrumentation does, and records
// nothing.
//
// The tokens histogram has the buckets the GenAI semantic conventions
// advise for gen_ai.client.token.usage.
func New(opts ...Option) (*Observer, error) {
	o := options{tp: otel.GetTracerProvider(), mp: otel.GetMeterProvider()}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	meter := o.mp.Meter(ScopeName)
	obs := &Observer{tracer: o.tp.Tracer(ScopeName)}
	var err error
	if obs.retries, err = meter.Int64Counter(MetricRetries, metric.WithUnit("{retry}"),
		metric.WithDescription("Retries scheduled, by error class, provider, model and credential.")); err != nil {
		otel.Handle(err)
		obs.retries = noop.Int64Counter{}
	}
	if obs.chains, err = meter.Int64Counter(MetricRetryChains, metric.WithUnit("{chain}"),
		metric.WithDescription("Retry chains ended, by outcome: recovered, exhausted, cancelled, failed.")); err != nil {
		otel.Handle(err)
		obs.chains = noop.Int64Counter{}
	}
	if obs.backoff, err = meter.Float64Histogram(MetricBackoffDuration, metric.WithUnit("s"),
		metric.WithDescription("Time spent waiting out a backoff before a retry, or until it was cancelled.")); err != nil {
		otel.Handle(err)
		obs.backoff = noop.Float64Histogram{}
	}
	if obs.compactions, err = meter.Int64Counter(MetricCompactions, metric.WithUnit("{compaction}"),
		metric.WithDescription("Automatic compactions ended, by reason and outcome.")); err != nil {
		otel.Handle(err)
		obs.compactions = noop.Int64Counter{}
	}
	if obs.sharedWaits, err = meter.Int64Counter(MetricSharedLimitWaits, metric.WithUnit("{wait}"),
		metric.WithDescription("Waits on a limit shared by the sessions of a process, by key (provider and credential) and reason.")); err != nil {
		otel.Handle(err)
		obs.sharedWaits = noop.Int64Counter{}
	}
	if obs.tokens, err = meter.Int64Histogram(MetricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens used per model call, by token type (input, output)."),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)); err != nil {
		otel.Handle(err)
		obs.tokens = noop.Int64Histogram{}
	}
	return obs, nil
}

// turn is what the observer knows of a turn in flight. The session calls
// its observer one call at a time, so it needs no lock.
type turn struct {
	span     trace.Span
	session  string
	model    policy.Model
	retries  int
	attempt  int
	input    int
	output   int
	run      *run
	wait     *wait
	compact  *compaction
	finished bool
}

type run struct {
	span          trace.Span
	input, output int
	model         string
	stopReason    string
	failed        bool
	errorText     string
	// ended: Run returned at endedAt; the span waits for the decision
	// on the run's end, which names the class of its error.
	ended   bool
	endedAt time.Time
}

type wait struct {
	span  trace.Span
	start time.Time
	attrs []attribute.KeyValue
}

type compaction struct {
	span   trace.Span
	reason transcript.CompactionReason
}

// turnOf returns o's turn that ctx belongs to. The context's key is o
// itself, so that other Observers on the same session keep their own.
func (o *Observer) turnOf(ctx context.Context) *turn {
	t, _ := ctx.Value(o).(*turn)
	return t
}

// StartTurn starts the turn's span, a child of the span in ctx.
func (o *Observer) StartTurn(ctx context.Context, sessionID string, model policy.Model) context.Context {
	t := &turn{session: sessionID, model: model}
	ctx, t.span = o.tracer.Start(ctx, SpanTurn, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(append(modelAttrs(model.Provider, model.ID), KeyConversation.String(sessionID))...))
	return context.WithValue(ctx, o, t)
}

// StartRun starts the run's span, a child of the turn's; the agent runs in
// its context, so a traced client's spans are the run's children.
func (o *Observer) StartRun(ctx context.Context, req session.RunRequest) (context.Context, func(error)) {
	t := o.turnOf(ctx)
	if t == nil {
		return ctx, nil
	}
	o.settleRun(t, classify.None)
	o.endWait(t, "elapsed")
	attrs := append(modelAttrs(req.Model.Provider, req.Model.ID),
		KeyOperation.String("chat"), KeyConversation.String(req.SessionID),
		KeyContinuation.Bool(req.Prompt == nil), KeyAttempt.Int(t.attempt))
	if req.Credential != nil {
		// The store's own ID, which an OTLP exporter cannot send unless
		// it is valid UTF-8.
		attrs = append(attrs, KeyCredential.String(wiretext.String(req.Credential.ID)))
	}
	r := &run{}
	ctx, r.span = o.tracer.Start(ctx, SpanRun, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	t.run = r
	return ctx, func(err error) {
		r.ended, r.endedAt = true, time.Now()
		if err != nil {
			r.failed, r.errorText = true, wiretext.String(err.Error()) // the agent's own error
		}
	}
}

// Observe turns ev into span changes and metric points.
func (o *Observer) Observe(ctx context.Context, ev events.Event) {
	t := o.turnOf(ctx)
	if t != nil && t.finished {
		t = nil
	}
	switch e := ev.(type) {
	case events.MessageEnd:
		o.message(ctx, t, e.Message)
	case events.StateChange:
		return // the decision's own events follow
	case events.AutoRetryStart:
		o.retryStart(ctx, t, e)
	case events.AutoRetryEnd:
		o.retryEnd(ctx, t, e)
	case events.AutoCompactionStart:
		o.compactionStart(ctx, t, e)
	case events.AutoCompactionEnd:
		o.compactionEnd(ctx, t, e)
	case events.TurnSettled:
		o.settled(t, e)
	case events.SharedLimitWait:
		o.sharedWaits.Add(ctx, 1, metric.WithAttributes(KeySharedLimitKey.String(e.Key), KeySharedLimitWhy.String(e.Reason)))
	}
}

// message records a finished assistant message's tokens.
func (o *Observer) message(ctx context.Context, t *turn, m transcript.Message) {
	if m.Role != transcript.RoleAssistant {
		return
	}
	if t != nil {
		if r := t.run; r != nil && !r.ended {
			if m.Usage != nil {
				r.input += m.Usage.Input
				r.output += m.Usage.Output
			}
			r.model, r.stopReason = m.Model, string(m.StopReason)
			r.failed, r.errorText = m.IsError(), m.ErrorMessage
		}
		if m.Usage != nil {
			t.input += m.Usage.Input
			t.output += m.Usage.Output
		}
	}
	if m.Usage == nil {
		return
	}
	attrs := append(modelAttrs(m.Provider, m.Model), KeyOperation.String("chat"))
	o.tokens.Record(ctx, int64(m.Usage.Input), metric.WithAttributes(append(attrs, KeyTokenType.String("input"))...))
	o.tokens.Record(ctx, int64(m.Usage.Output), metric.WithAttributes(append(attrs, KeyTokenType.String("output"))...))
}

func (o *Observer) retryStart(ctx context.Context, t *turn, e events.AutoRetryStart) {
	attrs := append(modelAttrs(e.Provider, e.Model), KeyErrorType.String(e.ErrorClass.String()))
	if e.Credential != "" {
		attrs = append(attrs, KeyCredential.String(e.Credential))
	}
	o.retries.Add(ctx, 1, metric.WithAttributes(attrs...))
	if t == nil {
		return
	}
	o.settleRun(t, e.ErrorClass)
	t.retries++
	t.attempt = e.Attempt
	w := &wait{start: time.Now(), attrs: append(modelAttrs(e.Provider, e.Model), KeyErrorType.String(e.ErrorClass.String()))}
	_, w.span = o.tracer.Start(trace.ContextWithSpan(ctx, t.span), SpanBackoff, trace.WithAttributes(append(attrs,
		KeyAttempt.Int(e.Attempt), KeyMaxAttempts.Int(e.MaxAttempts), KeyDelay.Int64(e.DelayMs))...))
	t.wait = w
}

func (o *Observer) retryEnd(ctx context.Context, t *turn, e events.AutoRetryEnd) {
	attrs := []attribute.KeyValue{KeyRetryOutcome.String(string(e.Outcome))}
	if e.ErrorClass != classify.None {
		attrs = append(attrs, KeyErrorType.String(e.ErrorClass.String()))
	}
	if t != nil {
		attrs = append(attrs, modelAttrs(t.model.Provider, t.model.ID)...)
		o.settleRun(t, e.ErrorClass)
		o.endWait(t, "cancelled")
		t.attempt = 0
	}
	o.chains.Add(ctx, 1, metric.WithAttributes(attrs...))
}

func (o *Observer) compactionStart(ctx context.Context, t *turn, e events.AutoCompactionStart) {
	if t == nil {
		return
	}
	class := classify.None
	if r := t.run; r != nil && r.ended && r.failed && e.Reason == transcript.ReasonOverflow {
		class = classify.Overflow
	}
	o.settleRun(t, class)
	c := &compaction{reason: e.Reason}
	_, c.span = o.tracer.Start(trace.ContextWithSpan(ctx, t.span), SpanCompaction, trace.WithAttributes(KeyReason.String(string(e.Reason))))
	t.compact = c
}

func (o *Observer) compactionEnd(ctx context.Context, t *turn, e events.AutoCompactionEnd) {
	outcome := "failed"
	switch {
	case e.Result != nil:
		outcome = "compacted"
	case e.Aborted:
		outcome = "aborted"
	}
	var reason transcript.CompactionReason
	if t != nil && t.compact != nil {
		reason = t.compact.reason
		span := t.compact.span
		t.compact = nil
		span.SetAttributes(KeyCompactOutcome.String(outcome), KeyCompactWillRetry.Bool(e.WillRetry))
		if e.Result != nil {
			span.SetAttributes(KeyTokensBefore.Int(e.Result.TokensBefore), KeyTokensAfter.Int(e.Result.TokensAfter))
		}
		if outcome == "failed" {
			span.SetStatus(codes.Error, e.ErrorMessage)
		}
		span.End()
	} else if e.Result != nil {
		reason = e.Result.Reason
	}
	o.compactions.Add(ctx, 1, metric.WithAttributes(KeyReason.String(string(reason)), KeyCompactOutcome.String(outcome)))
}

// settled ends the turn's span and whatever is still open under it.
func (o *Observer) settled(t *turn, e events.TurnSettled) {
	if t == nil {
		return
	}
	o.settleRun(t, e.ErrorClass)
	o.endWait(t, "cancelled")
	if c := t.compact; c != nil {
		c.span.SetAttributes(KeyCompactOutcome.String("aborted"))
		c.span.End()
		t.compact = nil
	}
	t.span.SetAttributes(KeyTurnRetries.Int(t.retries), KeyInputTokens.Int(t.input), KeyOutputTokens.Int(t.output))
	if e.Err == nil {
		t.span.SetAttributes(KeyTurnOutcome.String("success"))
	} else {
		code := rpc.ErrorCode(e.Err)
		if code == "" {
			code = "error"
		}
		errorType := code
		if e.ErrorClass != classify.None {
			errorType = e.ErrorClass.String()
		}
		t.span.SetAttributes(KeyTurnOutcome.String(code), KeyErrorType.String(errorType))
		t.span.SetStatus(codes.Error, e.Err.Error())
	}
	t.span.End()
	t.finished = true
}

// settleRun ends the span of a run that returned, once the decision on
// its end is known: class is the class of its error, when the decision
// names one.
func (o *Observer) settleRun(t *turn, class classify.Class) {
	r := t.run
	if r == nil || !r.ended {
		return
	}
	t.run = nil
	r.span.SetAttributes(KeyInputTokens.Int(r.input), KeyOutputTokens.Int(r.output))
	if r.model != "" {
		r.span.SetAttributes(KeyResponseModel.String(r.model))
	}
	if r.stopReason != "" {
		r.span.SetAttributes(KeyFinishReasons.StringSlice([]string{r.stopReason}))
	}
	if r.failed {
		errorType := "_OTHER"
		if class != classify.None {
			errorType = class.String()
		}
		r.span.SetAttributes(KeyErrorType.String(errorType))
		r.span.SetStatus(codes.Error, r.errorText)
	}
	r.span.End(trace.WithTimestamp(r.endedAt))
}

// endWait ends the backoff wait in progress: it elapsed (a run starts) or
// was cancelled.
func (o *Observer) endWait(t *turn, outcome string) {
	w := t.wait
	if w == nil {
		return
	}
	t.wait = nil
	now := time.Now()
	w.span.SetAttributes(KeyBackoffOutcome.String(outcome))
	w.span.End(trace.WithTimestamp(now))
	o.backoff.Record(context.Background(), now.Sub(w.start).Seconds(),
		metric.WithAttributes(append(w.attrs, KeyBackoffOutcome.String(outcome))...))
}

// modelAttrs are the GenAI attributes of a provider and a model, those
// that are set.
func modelAttrs(provider, model string) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 4)
	if provider != "" {
		attrs = append(attrs, KeySystem.String(provider), KeyProviderName.String(provider))
	}
	if model != "" {
		attrs = append(attrs, KeyRequestModel.String(model))
	}
	return attrs
}
