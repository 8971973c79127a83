package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heavy are the dependencies that made the command 79 MB and its first
// build from empty caches minutes long, for features few runs use: the
// SVG diagram (Graphviz built to WebAssembly, run by wazero, with image and
// font libraries) and the OTLP exporters (which import gRPC, its generated
// code and grpc-gateway even for OTLP/HTTP).
var heavy = map[string]string{
	"github.com/tetratelabs/wazero":      "svg",
	"github.com/goccy/go-graphviz":       "svg",
	"github.com/fogleman/gg":             "svg",
	"github.com/disintegration/imaging":  "svg",
	"github.com/golang/freetype":         "svg",
	"github.com/flopp/go-findfont":       "svg",
	"golang.org/x/image":                 "svg",
	"google.golang.org/grpc":             "otlp",
	"google.golang.org/genproto":         "otlp",
	"github.com/grpc-ecosystem":          "otlp",
	"go.opentelemetry.io/otel/exporters": "otlp",
	"go.opentelemetry.io/otel/sdk":       "otlp",
}

// TestDefaultBuildLeavesOutHeavyParts: the command built without tags
// imports none of heavy, and each comes back with its build tag, so that
// only the users of a feature pay for it.
func TestDefaultBuildLeavesOutHeavyParts(t *testing.T) {
	listed := map[string][]string{}
	deps := func(tags string) []string {
		if _, ok := listed[tags]; !ok {
			out, err := exec.Command("go", "list", "-tags", tags, "-deps", ".").Output()
			require.NoError(t, err)
			listed[tags] = strings.Fields(string(out))
		}
		return listed[tags]
	}
	imports := func(deps []string, prefix string) bool {
		for _, d := range deps {
			if d == prefix || strings.HasPrefix(d, prefix+"/") {
				return true
			}
		}
		return false
	}
	light := deps("")
	require.Contains(t, light, "github.com/agentfsm/agentfsm/session")
	for prefix, tag := range heavy {
		assert.False(t, imports(light, prefix), "the default build imports %s; only the tag %s should", prefix, tag)
		assert.True(t, imports(deps(tag), prefix), "the build with the tag %s does not import %s", tag, prefix)
	}
}

// sdks are the provider SDKs the adapters used to link: the two endpoints
// they need are spoken over net/http (providers/anthropic, providers/openai),
// so no build of the command imports them, whatever its tags.
var sdks = []string{"github.com/anthropics/anthropic-sdk-go", "github.com/openai/openai-go"}

// TestNoBuildLinksAProviderSDK: neither the default build nor the one with
// every tag imports a provider SDK, though both import the adapters.
func TestNoBuildLinksAProviderSDK(t *testing.T) {
	for _, tags := range []string{"", "svg,otlp"} {
		out, err := exec.Command("go", "list", "-tags", tags, "-deps", ".").Output()
		require.NoError(t, err)
		deps := strings.Fields(string(out))
		require.Contains(t, deps, "github.com/agentfsm/agentfsm/providers/anthropic")
		require.Contains(t, deps, "github.com/agentfsm/agentfsm/providers/openai")
		for _, d := range deps {
			for _, sdk := range sdks {
				assert.False(t, strings.HasPrefix(d, sdk), "the build with tags %q imports %s", tags, d)
			}
		}
	}
}
