//go:build !otlp

package main

import (
	"fmt"
	"os"
)

// otlpBuilt reports whether this binary exports over OTLP.
const otlpBuilt = false

// startExport, in a binary built without the build tag otlp, exports
// nothing and says so on stderr, once, naming the variable that asked for
// the export and how to build a binary that has it; the subcommand goes on.
func (t *telemetry) startExport(env *environment, _ string) error {
	fmt.Fprintf(env.stderr, "agentfsm: %s is set, but this agentfsm was built without OTLP export, so nothing is exported: build it with `go build -tags otlp ./cmd/agentfsm`\n",
		wantedBy(os.LookupEnv))
	return nil
}
