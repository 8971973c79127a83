package otelsession_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/limiter"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/otelsession"
	"github.com/agentfsm/agentfsm/session/scripted"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is a session observed by an Observer on in-memory exporters.
type rig struct {
	t      *testing.T
	start  time.Time
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	s      *session.Session
}

func newRig(t *testing.T, calls []scripted.Call, opts ...session.Option) *rig {
	r := &rig{t: t, start: time.Now(), spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	obs, err := otelsession.New(otelsession.WithTracerProvider(r.tp), otelsession.WithMeterProvider(mp))
	require.NoError(t, err)
	agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: calls})
	s, err := session.New(agent, append([]session.Option{session.WithModel(scripted.DefaultModel), session.WithSessionID("s1"),
		session.WithObserver(obs)}, opts...)...)
	require.NoError(t, err)
	r.s = s
	t.Cleanup(func() {
		s.Close()
		require.NoError(t, r.tp.Shutdown(context.Background()))
		require.NoError(t, mp.Shutdown(context.Background()))
	})
	return r
}

// prompt runs a turn inside the caller's span "caller".
func (r *rig) prompt(text string) error {
	ctx, span := r.tp.Tracer("test").Start(context.Background(), "caller")
	defer span.End()
	return r.s.Prompt(ctx, text)
}

// spanLines describes the finished spans of one trace, a parent before
// its children, children in the order they started (then ended): "name
// <parent> @start+duration status {attrs}", times from the rig's start.
func (r *rig) spanLines() []string {
	stubs := r.spans.GetSpans()
	sort.SliceStable(stubs, func(i, j int) bool { return stubs[i].StartTime.Before(stubs[j].StartTime) })
	names := map[string]string{}
	children := map[string][]tracetest.SpanStub{}
	for _, s := range stubs {
		require.Equal(r.t, stubs[0].SpanContext.TraceID(), s.SpanContext.TraceID(), "one trace")
		names[s.SpanContext.SpanID().String()] = s.Name
		parent := ""
		if s.Parent.IsValid() {
			parent = s.Parent.SpanID().String()
		}
		children[parent] = append(children[parent], s)
	}
	var out []string
	var walk func(parent string)
	walk = func(parent string) {
		for _, s := range children[parent] {
			p := "-"
			if parent != "" {
				p = names[parent]
			}
			line := fmt.Sprintf("%s <%s> @%v+%v", s.Name, p, s.StartTime.Sub(r.start), s.EndTime.Sub(s.StartTime))
			if s.Status.Code.String() != "Unset" {
				line += fmt.Sprintf(" %s(%s)", s.Status.Code, s.Status.Description)
			}
			out = append(out, line+" "+attrs(s.Attributes))
			walk(s.SpanContext.SpanID().String())
		}
	}
	walk("")
	require.Len(r.t, out, len(stubs), "every span's parent is in the trace")
	return out
}

// sorted returns lines with the attributes in each one's braces sorted, as
// spanLines and metricLines write them.
func sorted(lines ...string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		head, rest, _ := strings.Cut(l, "{")
		inner, tail, _ := strings.Cut(rest, "}")
		parts := strings.Fields(inner)
		slices.Sort(parts)
		out[i] = head + "{" + strings.Join(parts, " ") + "}" + tail
	}
	return out
}

func attrs(kvs []attribute.KeyValue) string {
	var parts []string
	for _, kv := range kvs {
		parts = append(parts, fmt.Sprintf("%s=%s", kv.Key, kv.Value.String()))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

// metricLines describes the metric points: "name{attrs} = value" for a
// sum, "name{attrs} count=N sum=S" for a histogram.
func (r *rig) metricLines() []string {
	var rm metricdata.ResourceMetrics
	require.NoError(r.t, r.reader.Collect(context.Background(), &rm))
	var out []string
	for _, sm := range rm.ScopeMetrics {
		require.Equal(r.t, otelsession.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s%s = %d", m.Name, attrs(p.Attributes.ToSlice()), p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s%s count=%d sum=%g", m.Name, attrs(p.Attributes.ToSlice()), p.Count, p.Sum))
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s%s count=%d sum=%d", m.Name, attrs(p.Attributes.ToSlice()), p.Count, p.Sum))
				}
			default:
				r.t.Fatalf("unexpected metric %s of %T", m.Name, m.Data)
			}
		}
	}
	slices.Sort(out)
	return out
}

func fail(text string) scripted.Call { return scripted.Call{StopReason: "error", ErrorMessage: text} }
func ok(text string) scripted.Call   { return scripted.Call{StopReason: "stop", Text: text} }

const (
	model    = "gen_ai.provider.name=scripted gen_ai.request.model=scripted-1 gen_ai.system=scripted"
	runAttrs = "gen_ai.conversation.id=s1 gen_ai.operation.name=chat " + model
	tokens   = "gen_ai.client.token.usage{gen_ai.operation.name=chat gen_ai.provider.name=scripted gen_ai.request.model=scripted-1 gen_ai.system=scripted gen_ai.token.type="
)

// TestTransientChain: a 503, a backoff of 2 s, then success. The turn is
// the caller's child; the runs, the wait are the turn's; the failed run
// carries the classifier's verdict. Issue item 3.
func TestTransientChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, []scripted.Call{fail("503 Service Unavailable"), ok("done")})
		require.NoError(t, r.prompt("hi"))
		assert.Equal(t, sorted(
			"caller <-> @0s+2s {}",
			"agentfsm.turn <caller> @0s+2s {agentfsm.turn.outcome=success agentfsm.turn.retries=1 gen_ai.conversation.id=s1 "+model+" gen_ai.usage.input_tokens=200 gen_ai.usage.output_tokens=40}",
			"agentfsm.run <agentfsm.turn> @0s+0s Error(503 Service Unavailable) {agentfsm.retry.attempt=0 agentfsm.run.continuation=false error.type=retryable gen_ai.response.finish_reasons=[\"error\"] gen_ai.response.model=scripted-1 "+runAttrs+" gen_ai.usage.input_tokens=100 gen_ai.usage.output_tokens=20}",
			"agentfsm.backoff <agentfsm.turn> @0s+2s {agentfsm.backoff.outcome=elapsed agentfsm.retry.attempt=1 agentfsm.retry.delay_ms=2000 agentfsm.retry.max_attempts=3 error.type=retryable "+model+"}",
			"agentfsm.run <agentfsm.turn> @2s+0s {agentfsm.retry.attempt=1 agentfsm.run.continuation=true gen_ai.response.finish_reasons=[\"stop\"] gen_ai.response.model=scripted-1 "+runAttrs+" gen_ai.usage.input_tokens=100 gen_ai.usage.output_tokens=20}",
		), r.spanLines())
		assert.Equal(t, sorted(
			"agentfsm.backoff.duration{agentfsm.backoff.outcome=elapsed error.type=retryable "+model+"} count=1 sum=2",
			"agentfsm.retries{error.type=retryable "+model+"} = 1",
			"agentfsm.retry.chains{agentfsm.retry.outcome=recovered "+model+"} = 1",
			tokens+"input} count=2 sum=200",
			tokens+"output} count=2 sum=40",
		), r.metricLines())
	})
}

// TestExhaustedChain: four 503s: three waits of 2, 4 and 8 s, then the
// chain is exhausted and the turn fails with the class of its error.
func TestExhaustedChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, []scripted.Call{fail("503"), fail("503"), fail("503"), fail("503")})
		require.ErrorIs(t, r.prompt("hi"), policy.ErrExhausted)
		run := func(at string, attempt int, continuation bool) string {
			return fmt.Sprintf(`agentfsm.run <agentfsm.turn> @%s+0s Error(503) {agentfsm.retry.attempt=%d agentfsm.run.continuation=%v error.type=retryable gen_ai.response.finish_reasons=["error"] gen_ai.response.model=scripted-1 %s gen_ai.usage.input_tokens=100 gen_ai.usage.output_tokens=20}`,
				at, attempt, continuation, runAttrs)
		}
		wait := func(at, d string, attempt int, delay int) string {
			return fmt.Sprintf("agentfsm.backoff <agentfsm.turn> @%s+%s {agentfsm.backoff.outcome=elapsed agentfsm.retry.attempt=%d agentfsm.retry.delay_ms=%d agentfsm.retry.max_attempts=3 error.type=retryable %s}",
				at, d, attempt, delay, model)
		}
		assert.Equal(t, sorted(
			"caller <-> @0s+14s {}",
			"agentfsm.turn <caller> @0s+14s Error(policy: retries exhausted after 3 attempts: 503) {agentfsm.turn.outcome=exhausted agentfsm.turn.retries=3 error.type=retryable gen_ai.conversation.id=s1 "+model+" gen_ai.usage.input_tokens=400 gen_ai.usage.output_tokens=80}",
			run("0s", 0, false),
			wait("0s", "2s", 1, 2000),
			run("2s", 1, true),
			wait("2s", "4s", 2, 4000),
			run("6s", 2, true),
			wait("6s", "8s", 3, 8000),
			run("14s", 3, true),
		), r.spanLines())
		assert.Equal(t, sorted(
			"agentfsm.backoff.duration{agentfsm.backoff.outcome=elapsed error.type=retryable "+model+"} count=3 sum=14",
			"agentfsm.retries{error.type=retryable "+model+"} = 3",
			"agentfsm.retry.chains{agentfsm.retry.outcome=exhausted error.type=retryable "+model+"} = 1",
			tokens+"input} count=4 sum=400",
			tokens+"output} count=4 sum=80",
		), r.metricLines())
	})
}

// TestOverflowRecovery: the second turn overflows; the run that did is
// marked overflow, a compaction follows under the turn, then the
// continuation, and the turn succeeds.
func TestOverflowRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.DefaultConfig()
		cfg.Compaction.KeepRecentTokens = 5
		const tooLong = "prompt is too long: 213462 tokens > 200000 maximum"
		r := newRig(t, []scripted.Call{ok("first answer"), fail(tooLong), ok("recovered")}, session.WithConfig(cfg))
		require.NoError(t, r.s.Prompt(context.Background(), "first question, long enough to matter"))
		r.spans.Reset()
		before := r.metricLines()
		require.NoError(t, r.prompt("second question"))
		assert.Equal(t, sorted(
			"caller <-> @0s+0s {}",
			"agentfsm.turn <caller> @0s+0s {agentfsm.turn.outcome=success agentfsm.turn.retries=0 gen_ai.conversation.id=s1 "+model+" gen_ai.usage.input_tokens=200 gen_ai.usage.output_tokens=40}",
			`agentfsm.run <agentfsm.turn> @0s+0s Error(`+tooLong+`) {agentfsm.retry.attempt=0 agentfsm.run.continuation=false error.type=overflow gen_ai.response.finish_reasons=["error"] gen_ai.response.model=scripted-1 `+runAttrs+` gen_ai.usage.input_tokens=100 gen_ai.usage.output_tokens=20}`,
			"agentfsm.compaction <agentfsm.turn> @0s+0s {agentfsm.compaction.outcome=compacted agentfsm.compaction.reason=overflow agentfsm.compaction.tokens_after=125566 agentfsm.compaction.tokens_before=213462 agentfsm.compaction.will_retry=true}",
			`agentfsm.run <agentfsm.turn> @0s+0s {agentfsm.retry.attempt=0 agentfsm.run.continuation=true gen_ai.response.finish_reasons=["stop"] gen_ai.response.model=scripted-1 `+runAttrs+` gen_ai.usage.input_tokens=100 gen_ai.usage.output_tokens=20}`,
		), r.spanLines())
		assert.Equal(t, sorted(tokens+"input} count=1 sum=100", tokens+"output} count=1 sum=20"), before)
		assert.Equal(t, sorted(
			"agentfsm.compactions{agentfsm.compaction.outcome=compacted agentfsm.compaction.reason=overflow} = 1",
			tokens+"input} count=3 sum=300",
			tokens+"output} count=3 sum=60",
		), r.metricLines())
	})
}

// TestAbortedWait: a retry cancelled half a second into its 2 s wait: the
// wait's span and the backoff histogram show the half second, the chain
// counts as cancelled, and the turn fails as retry_cancelled.
func TestAbortedWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, []scripted.Call{fail("503"), ok("never")})
		ctx, span := r.tp.Tracer("test").Start(context.Background(), "caller")
		done := make(chan error, 1)
		go func() { done <- r.s.Prompt(ctx, "hi") }()
		time.Sleep(500 * time.Millisecond)
		r.s.AbortRetry()
		require.ErrorIs(t, <-done, policy.ErrRetryCancelled)
		span.End()
		assert.Equal(t, sorted(
			"caller <-> @0s+500ms {}",
			"agentfsm.turn <caller> @0s+500ms Error(policy: retry cancelled) {agentfsm.turn.outcome=retry_cancelled agentfsm.turn.retries=1 error.type=retry_cancelled gen_ai.conversation.id=s1 "+model+" gen_ai.usage.input_tokens=100 gen_ai.usage.output_tokens=20}",
			`agentfsm.run <agentfsm.turn> @0s+0s Error(503) {agentfsm.retry.attempt=0 agentfsm.run.continuation=false error.type=retryable gen_ai.response.finish_reasons=["error"] gen_ai.response.model=scripted-1 `+runAttrs+` gen_ai.usage.input_tokens=100 gen_ai.usage.output_tokens=20}`,
			"agentfsm.backoff <agentfsm.turn> @0s+500ms {agentfsm.backoff.outcome=cancelled agentfsm.retry.attempt=1 agentfsm.retry.delay_ms=2000 agentfsm.retry.max_attempts=3 error.type=retryable "+model+"}",
		), r.spanLines())
		assert.Equal(t, sorted(
			"agentfsm.backoff.duration{agentfsm.backoff.outcome=cancelled error.type=retryable "+model+"} count=1 sum=0.5",
			"agentfsm.retries{error.type=retryable "+model+"} = 1",
			"agentfsm.retry.chains{agentfsm.retry.outcome=cancelled "+model+"} = 1",
			tokens+"input} count=1 sum=100",
			tokens+"output} count=1 sum=20",
		), r.metricLines())
	})
}

// TestUsageLimitNamesTheCredential: the run and the retry name the
// credential that hit the limit, by ID; the switch retries at once.
func TestUsageLimitNamesTheCredential(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, err := credentials.NewMemoryCredentials(nil,
			policy.Credential{ID: "A", Provider: "scripted", Type: "api_key", Secret: "env:KEY_A"},
			policy.Credential{ID: "B", Provider: "scripted", Type: "api_key", Secret: "env:KEY_B"})
		if err != nil {
			t.Fatal(err)
		}
		r := newRig(t, []scripted.Call{fail("usage limit reached"), ok("done")}, session.WithCredentials(store))
		require.NoError(t, r.prompt("hi"))
		lines := r.spanLines()
		require.Len(t, lines, 5)
		first := map[bool]string{true: "A", false: "B"}[strings.Contains(lines[2], "agentfsm.credential.id=A")]
		second := map[string]string{"A": "B", "B": "A"}[first]
		assert.Contains(t, lines[2], "agentfsm.credential.id="+first+" ")
		assert.Contains(t, lines[2], "error.type=usage_limit")
		assert.Contains(t, lines[3], "agentfsm.backoff <agentfsm.turn> @0s+0s {agentfsm.backoff.outcome=elapsed agentfsm.credential.id="+first+" ")
		assert.Contains(t, lines[4], "agentfsm.credential.id="+second+" ")
		assert.Contains(t, r.metricLines(), sorted("agentfsm.retries{agentfsm.credential.id=" + first + " error.type=usage_limit " + model + "} = 1")[0])
		for _, l := range lines {
			assert.NotContains(t, l, "KEY_", "never where a secret is")
		}
	})
}

// TestOneObserverManySessions: an Observer serves sessions running at once;
// each turn is a trace of its own caller, whose spans have all ended by the
// time Prompt returns.
func TestOneObserverManySessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spans := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		obs, err := otelsession.New(otelsession.WithTracerProvider(tp), otelsession.WithMeterProvider(mp))
		require.NoError(t, err)
		const n = 8
		done := make(chan error, n)
		for i := range n {
			agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{fail("503"), ok("done")}})
			s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithObserver(obs))
			require.NoError(t, err)
			defer s.Close()
			go func() {
				ctx, span := tp.Tracer("test").Start(context.Background(), fmt.Sprint("caller-", i))
				err := s.Prompt(ctx, "hi")
				// The caller's span ends before the result is handed
				// over, so that it is exported when the test reads the
				// spans: a deferred End would race with that read.
				span.End()
				done <- err
			}()
		}
		for range n {
			require.NoError(t, <-done)
		}
		// The spans of each trace, in the order they ended: one session's
		// spans end in its order, whatever the other sessions do.
		traces := map[string][]string{}
		for _, s := range spans.GetSpans() {
			id := s.SpanContext.TraceID().String()
			traces[id] = append(traces[id], s.Name)
		}
		assert.Len(t, traces, n)
		callers := map[string]bool{}
		for id, names := range traces {
			require.Len(t, names, 5, "trace %s: %v", id, names)
			assert.Equal(t, []string{otelsession.SpanRun, otelsession.SpanBackoff, otelsession.SpanRun, otelsession.SpanTurn}, names[:4], "trace %s", id)
			assert.Regexp(t, `^caller-[0-7]$`, names[4], "trace %s", id)
			callers[names[4]] = true
		}
		assert.Len(t, callers, n, "each caller has a trace of its own")
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		for _, m := range rm.ScopeMetrics[0].Metrics {
			if m.Name == otelsession.MetricRetries {
				assert.Equal(t, int64(n), m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
			}
		}
		require.NoError(t, tp.Shutdown(context.Background()))
		require.NoError(t, mp.Shutdown(context.Background()))
	})
}

// TestTwoObserversOnOneSession: two Observers with providers of their own
// each make the whole trace, and neither touches the other's spans.
func TestTwoObserversOnOneSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var exporters [2]*tracetest.InMemoryExporter
		var opts []session.Option
		for i := range exporters {
			exporters[i] = tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporters[i]))
			defer tp.Shutdown(context.Background())
			obs, err := otelsession.New(otelsession.WithTracerProvider(tp))
			require.NoError(t, err)
			opts = append(opts, session.WithObserver(obs))
		}
		agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{fail("503"), ok("done")}})
		s, err := session.New(agent, append(opts, session.WithModel(scripted.DefaultModel))...)
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		for i, e := range exporters {
			var names []string
			for _, sp := range e.GetSpans() {
				names = append(names, sp.Name)
			}
			assert.Equal(t, []string{"agentfsm.run", "agentfsm.backoff", "agentfsm.run", "agentfsm.turn"}, names, "observer %d", i)
		}
	})
}

// TestFailedAndAbortedCompactions: an overflow whose compaction fails ends
// the compaction span in error and the turn as overflow; one aborted
// during its compaction ends it as aborted, and the turn as aborted.
func TestFailedAndAbortedCompactions(t *testing.T) {
	const tooLong = "prompt is too long: 213462 tokens > 200000 maximum"
	cfg := policy.DefaultConfig()
	cfg.Compaction.KeepRecentTokens = 5
	failing := summarizer(func(ctx context.Context) (policy.Summary, error) {
		return policy.Summary{}, errors.New("model unavailable")
	})
	blocking := summarizer(func(ctx context.Context) (policy.Summary, error) {
		<-ctx.Done()
		return policy.Summary{}, context.Cause(ctx)
	})
	t.Run("failed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, []scripted.Call{ok("first answer"), fail(tooLong)}, session.WithConfig(cfg), session.WithSummarizer(failing))
			require.NoError(t, r.s.Prompt(context.Background(), "first question, long enough to matter"))
			r.spans.Reset()
			require.ErrorIs(t, r.prompt("second"), policy.ErrOverflow)
			lines := r.spanLines()
			require.Len(t, lines, 4)
			assert.Equal(t, sorted("agentfsm.compaction <agentfsm.turn> @0s+0s Error(Context overflow recovery failed: model unavailable) {agentfsm.compaction.outcome=failed agentfsm.compaction.reason=overflow agentfsm.compaction.will_retry=false}")[0], lines[3])
			assert.Contains(t, lines[1], "agentfsm.turn.outcome=overflow")
			assert.Contains(t, lines[1], "error.type=overflow")
			assert.Contains(t, r.metricLines(), sorted("agentfsm.compactions{agentfsm.compaction.outcome=failed agentfsm.compaction.reason=overflow} = 1")[0])
		})
	})
	t.Run("aborted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, []scripted.Call{ok("first answer"), fail(tooLong)}, session.WithConfig(cfg), session.WithSummarizer(blocking))
			require.NoError(t, r.s.Prompt(context.Background(), "first question, long enough to matter"))
			r.spans.Reset()
			done := make(chan error, 1)
			go func() { done <- r.prompt("second") }()
			time.Sleep(time.Second)
			r.s.Abort()
			require.ErrorIs(t, <-done, policy.ErrAborted)
			lines := r.spanLines()
			require.Len(t, lines, 4)
			assert.Equal(t, sorted("agentfsm.compaction <agentfsm.turn> @0s+1s {agentfsm.compaction.outcome=aborted agentfsm.compaction.reason=overflow agentfsm.compaction.will_retry=false}")[0], lines[3])
			assert.Contains(t, lines[1], "agentfsm.turn.outcome=aborted")
			assert.Contains(t, r.metricLines(), sorted("agentfsm.compactions{agentfsm.compaction.outcome=aborted agentfsm.compaction.reason=overflow} = 1")[0])
		})
	})
}

type summarizer func(ctx context.Context) (policy.Summary, error)

func (f summarizer) Summarize(ctx context.Context, _ policy.SummaryRequest) (policy.Summary, error) {
	return f(ctx)
}

// counter counts the spans started and ended.
type counter struct {
	mu           sync.Mutex
	started, end int
}

func (c *counter) OnStart(context.Context, sdktrace.ReadWriteSpan) {
	c.mu.Lock()
	c.started++
	c.mu.Unlock()
}
func (c *counter) OnEnd(sdktrace.ReadOnlySpan)      { c.mu.Lock(); c.end++; c.mu.Unlock() }
func (c *counter) Shutdown(context.Context) error   { return nil }
func (c *counter) ForceFlush(context.Context) error { return nil }

// TestAbortAtAnyPointEndsEverySpan: a turn with a retry, a compaction and
// slow calls, aborted after 0, 100, 200, ... ms: whenever the abort lands
// (in a run, a wait, a compaction, or after the turn), every span started
// is ended by the time Prompt returns, under its turn.
func TestAbortAtAnyPointEndsEverySpan(t *testing.T) {
	const tooLong = "prompt is too long: 213462 tokens > 200000 maximum"
	cfg := policy.DefaultConfig()
	cfg.Compaction.KeepRecentTokens = 5
	cfg.Retry.BaseDelayMs = 500
	slowSummary := summarizer(func(ctx context.Context) (policy.Summary, error) {
		select {
		case <-time.After(300 * time.Millisecond):
			return policy.Summary{Text: "summary"}, nil
		case <-ctx.Done():
			return policy.Summary{}, context.Cause(ctx)
		}
	})
	slowly := func(c scripted.Call) scripted.Call { c.LatencyMs = 200; return c }
	for at := time.Duration(0); at <= 2*time.Second; at += 100 * time.Millisecond {
		synctest.Test(t, func(t *testing.T) {
			count := &counter{}
			spans := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(count), sdktrace.WithSyncer(spans))
			defer tp.Shutdown(context.Background())
			agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{
				ok("first answer"), slowly(fail("503")), slowly(fail(tooLong)), slowly(ok("recovered")),
			}})
			obs, err := otelsession.New(otelsession.WithTracerProvider(tp))
			require.NoError(t, err)
			s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithConfig(cfg), session.WithSummarizer(slowSummary),
				session.WithObserver(obs))
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.Prompt(context.Background(), "first question, long enough to matter"))
			done := make(chan error, 1)
			go func() { done <- s.Prompt(context.Background(), "second") }()
			time.Sleep(at)
			s.Abort()
			<-done
			count.mu.Lock()
			defer count.mu.Unlock()
			assert.Equal(t, count.started, count.end, "abort at %v: every span ended", at)
			turns := 0
			for _, sp := range spans.GetSpans() {
				if sp.Name == otelsession.SpanTurn {
					turns++
				} else {
					assert.True(t, sp.Parent.IsValid(), "abort at %v: %s has its turn", at, sp.Name)
				}
			}
			assert.Equal(t, 2, turns, "abort at %v", at)
		})
	}
}

// TestNilProvidersAreRefused: a nil provider is refused as every option of
// the module refuses nil (session.WithObserver's rule), not silently taken
// for the global one.
func TestNilProvidersAreRefused(t *testing.T) {
	obs, err := otelsession.New(otelsession.WithTracerProvider(nil))
	assert.EqualError(t, err, "otelsession: nil TracerProvider")
	assert.Nil(t, obs)
	obs, err = otelsession.New(otelsession.WithMeterProvider(nil))
	assert.EqualError(t, err, "otelsession: nil MeterProvider")
	assert.Nil(t, obs)
	// A nil pointer in the interface (a provider variable never set) is
	// refused too, naming its type, instead of panicking in New.
	assert.NotPanics(t, func() { obs, err = otelsession.New(otelsession.WithTracerProvider((*sdktrace.TracerProvider)(nil))) })
	assert.EqualError(t, err, "otelsession: nil TracerProvider (*trace.TracerProvider)")
	assert.Nil(t, obs)
	assert.NotPanics(t, func() { obs, err = otelsession.New(otelsession.WithMeterProvider((*sdkmetric.MeterProvider)(nil))) })
	assert.EqualError(t, err, "otelsession: nil MeterProvider (*metric.MeterProvider)")
	assert.Nil(t, obs)
	obs, err = otelsession.New()
	require.NoError(t, err)
	assert.NotNil(t, obs, "without options, the global providers")
}

// TestTextIsValidUTF8: a credential ID and an error that are not valid
// UTF-8 reach no span or metric as they are (an OTLP exporter cannot
// encode such a string, and drops the batch): every attribute and status
// is valid UTF-8, with U+FFFD for each bad byte.
func TestTextIsValidUTF8(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, err := credentials.NewMemoryCredentials(nil,
			policy.Credential{ID: "A\xff", Provider: "scripted", Type: "api_key"},
			policy.Credential{ID: "B\xfe", Provider: "scripted", Type: "api_key"})
		if err != nil {
			t.Fatal(err)
		}
		r := newRig(t, []scripted.Call{fail("usage limit reached \xff"), fail("boom \xfe"), ok("done")}, session.WithCredentials(store))
		require.Error(t, r.prompt("hi"))
		stubs := r.spans.GetSpans()
		require.NotEmpty(t, stubs)
		var named bool
		for _, s := range stubs {
			assert.True(t, utf8.ValidString(s.Status.Description), "%s: status %q", s.Name, s.Status.Description)
			for _, kv := range s.Attributes {
				v := kv.Value.String()
				assert.True(t, utf8.ValidString(v), "%s: %s=%q", s.Name, kv.Key, v)
				named = named || kv.Key == otelsession.KeyCredential && strings.HasSuffix(v, "\uFFFD")
			}
		}
		assert.True(t, named, "the credential is named, in valid text")
		for _, l := range r.metricLines() {
			assert.True(t, utf8.ValidString(l), "metric %q", l)
		}
	})
}

// failingAgent is an Agent whose run cannot start, with an error whose
// text is not valid UTF-8.
type failingAgent struct{}

func (failingAgent) Run(context.Context, session.RunRequest, func(events.Event)) error {
	return errors.New("dial tcp: \xff")
}

// TestRunErrorIsValidUTF8: the agent's own error, not valid UTF-8, sets
// the run span's status in valid text.
func TestRunErrorIsValidUTF8(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spans := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
		defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
		obs, err := otelsession.New(otelsession.WithTracerProvider(tp))
		require.NoError(t, err)
		s, err := session.New(failingAgent{}, session.WithModel(scripted.DefaultModel), session.WithObserver(obs))
		require.NoError(t, err)
		defer s.Close()
		require.Error(t, s.Prompt(context.Background(), "hi"))
		var seen bool
		for _, st := range spans.GetSpans() {
			assert.True(t, utf8.ValidString(st.Status.Description), "%s: status %q", st.Name, st.Status.Description)
			seen = seen || strings.Contains(st.Status.Description, "dial tcp: \uFFFD")
		}
		assert.True(t, seen, "a span says why the run failed")
	})
}

// TestSharedLimitWaitIsCounted: a wait on a limit shared by sessions
// counts one agentfsm.shared_limit.waits point, by key and reason.
func TestSharedLimitWaitIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := limiter.New(limiter.Config{})
		require.NoError(t, err)
		limited := scripted.Call{StopReason: "error", ErrorMessage: "429 rate limit exceeded", Status: 429, Headers: map[string]string{"retry-after": "2"}}
		other, err := session.New(scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{limited, {StopReason: "stop", Text: "ok"}}}),
			session.WithModel(scripted.DefaultModel), session.WithLimiter(l))
		require.NoError(t, err)
		defer other.Close()
		done := make(chan error, 1)
		go func() { done <- other.Prompt(context.Background(), "hi") }()
		synctest.Wait()
		r := newRig(t, []scripted.Call{{StopReason: "stop", Text: "ok"}}, session.WithLimiter(l))
		require.NoError(t, r.prompt("hi"))
		require.NoError(t, <-done)
		r.s.Flush()
		assert.Contains(t, r.metricLines(), sorted("agentfsm.shared_limit.waits{agentfsm.shared_limit.key=" + scripted.DefaultModel.Provider + " agentfsm.shared_limit.reason=rate_limited} = 1")[0])
	})
}

// TestRunSpanNamesTheFallbackModel: after a switch to a fallback model
// (docs/policy.md §3.9), the run's span names the model it called.
func TestRunSpanNamesTheFallbackModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := policy.DefaultConfig()
		cfg.Fallback = &policy.FallbackConfig{Models: []policy.FallbackModel{{ID: "fallback-model"}}, After: "overloaded"}
		r := newRig(t, []scripted.Call{fail("529 overloaded_error: Overloaded"), ok("done")}, session.WithConfig(cfg))
		require.NoError(t, r.prompt("hi"))
		var models []string
		for _, s := range r.spans.GetSpans() {
			if s.Name != "agentfsm.run" {
				continue
			}
			for _, kv := range s.Attributes {
				if kv.Key == otelsession.KeyRequestModel {
					models = append(models, kv.Value.AsString())
				}
			}
		}
		assert.Equal(t, []string{"scripted-1", "fallback-model"}, models)
	})
}
