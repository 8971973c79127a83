//go:build !otlp

package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChatBinaryWithoutOTLPSaysSo: the default binary leaves the OTLP
// exporters out (they bring gRPC); with OTEL_EXPORTER_OTLP_ENDPOINT set, a
// chat still answers, sends nothing to the endpoint, and says once on
// stderr that this build exports nothing and how to build one that does.
func TestChatBinaryWithoutOTLPSaysSo(t *testing.T) {
	api := newFakeAnthropic(t)
	var requests atomic.Int32
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { requests.Add(1) }))
	t.Cleanup(endpoint.Close)
	api.srv.Push(api.transient(), api.ok("Done."))
	cmd := api.chatCmd(t, guard(t), "hi")
	cmd.Env = append(cmd.Env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="+endpoint.URL+"/v1/traces")
	code, out, errOut := runChatCmd(t, cmd, "")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "Done.\n", out)
	assert.Contains(t, errOut, "agentfsm: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, but this agentfsm was built without OTLP export, "+
		"so nothing is exported: build it with `go build -tags otlp ./cmd/agentfsm`\n")
	assert.Zero(t, requests.Load(), "nothing is sent to the endpoint")
}
