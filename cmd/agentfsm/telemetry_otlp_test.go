//go:build otlp

package main

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentfsm/agentfsm/session/rpc"
)

// collector is an OTLP/HTTP endpoint in process: it decodes the protobuf
// export requests and keeps their spans and metric names.
type collector struct {
	t       *testing.T
	mu      sync.Mutex
	spans   []span
	metrics map[string]bool
	service []string
}

// span is what the tests check of an exported span.
type span struct {
	name, id, parent, trace string
	attrs                   map[string]string
}

func newCollector(t *testing.T) (*collector, string) {
	c := &collector{t: t, metrics: map[string]bool{}}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = z
	}
	data, err := io.ReadAll(body)
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf body", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var resp proto.Message
	switch r.URL.Path {
	case "/v1/traces":
		var req tracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			c.service = append(c.service, attrMap(rs.Resource.Attributes)["service.name"])
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					c.spans = append(c.spans, span{name: s.Name, id: string(s.SpanId), parent: string(s.ParentSpanId),
						trace: string(s.TraceId), attrs: attrMap(s.Attributes)})
				}
			}
		}
		resp = &tracepb.ExportTraceServiceResponse{}
	case "/v1/metrics":
		var req metricspb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					c.metrics[m.Name] = true
				}
			}
		}
		resp = &metricspb.ExportMetricsServiceResponse{}
	default:
		http.NotFound(w, r)
		return
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = strconv.FormatBool(v.BoolValue)
		}
	}
	return m
}

// received returns the spans, the names of the metrics and the service
// names received so far.
func (c *collector) received() ([]span, map[string]bool, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	metrics := map[string]bool{}
	for k := range c.metrics {
		metrics[k] = true
	}
	return append([]span(nil), c.spans...), metrics, append([]string(nil), c.service...)
}

// checkTurnTrace checks the spans of one turn with one retry: a turn, two
// runs and a backoff wait under it, in one trace.
func checkTurnTrace(t *testing.T, spans []span) {
	t.Helper()
	byName := map[string][]span{}
	for _, s := range spans {
		byName[s.name] = append(byName[s.name], s)
	}
	require.Len(t, byName["agentfsm.turn"], 1, "spans: %v", spans)
	turn := byName["agentfsm.turn"][0]
	assert.Empty(t, turn.parent, "the turn is the trace's root")
	require.Len(t, byName["agentfsm.run"], 2)
	require.Len(t, byName["agentfsm.backoff"], 1)
	for _, s := range append(byName["agentfsm.run"], byName["agentfsm.backoff"]...) {
		assert.Equal(t, turn.id, s.parent, "%s is the turn's child", s.name)
		assert.Equal(t, turn.trace, s.trace)
	}
	assert.Equal(t, "retryable", byName["agentfsm.backoff"][0].attrs["error.type"])
	assert.Equal(t, "1", byName["agentfsm.backoff"][0].attrs["agentfsm.retry.attempt"])
	assert.Equal(t, "true", byName["agentfsm.run"][1].attrs["agentfsm.run.continuation"])
}

// TestChatBinaryExportsOverOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, a
// chat's turn arrives at the collector as spans (a turn, its runs and its
// wait) and metrics; --log-level warn logs the retry on stderr. Issue
// item 4.
func TestChatBinaryExportsOverOTLP(t *testing.T) {
	api := newFakeAnthropic(t)
	col, endpoint := newCollector(t)
	api.srv.Push(api.transient(), api.ok("Done."))
	cmd := api.chatCmd(t, guard(t), "--log-level", "warn", "hi")
	cmd.Env = append(cmd.Env, "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, "OTEL_SERVICE_NAME=chat-under-test")
	code, out, errOut := runChatCmd(t, cmd, "")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "Done.\n", out)
	assert.Contains(t, errOut, "level=WARN msg=auto_retry_start session.id=")
	assert.Contains(t, errOut, "error.class=retryable")
	assert.NotContains(t, errOut, "level=DEBUG")
	assert.NotContains(t, errOut, "OpenTelemetry", "the export succeeded")
	spans, metrics, services := col.received()
	checkTurnTrace(t, spans)
	assert.Contains(t, services, "chat-under-test", "the standard variables name the service")
	for _, name := range []string{"agentfsm.retries", "agentfsm.retry.chains", "agentfsm.backoff.duration", "gen_ai.client.token.usage"} {
		assert.True(t, metrics[name], "metric %s arrived", name)
	}
}

// TestRPCBinaryExportsOverOTLP: the RPC server exports its turns too,
// named agentfsm by default.
func TestRPCBinaryExportsOverOTLP(t *testing.T) {
	col, endpoint := newCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint) // the child's environment
	script := writeFile(t, "s.json", `{"calls":[{"stopReason":"error","errorMessage":"503 Service Unavailable"},{"stopReason":"stop","text":"ok"}]}`)
	settings := writeFile(t, "settings.json", `{"retry":{"baseDelayMs":1}}`)
	ctx := guard(t)
	c, err := rpc.Start(binary(t), io.Discard, "rpc", "--script", script, "--settings", settings)
	require.NoError(t, err)
	require.NoError(t, c.Prompt(ctx, "hi"))
	require.NoError(t, c.WaitForIdle(ctx))
	require.NoError(t, c.Close()) // the server flushes its spans as it exits
	spans, _, services := col.received()
	checkTurnTrace(t, spans)
	assert.Contains(t, services, "agentfsm")
}
