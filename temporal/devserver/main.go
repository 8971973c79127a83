// Command devserver runs a Temporal server in this process, on the
// loopback interface with an in-memory store (the server module's
// temporaltest package), for the temporal module's real-server test and
// its history recorder. It prints one JSON line, {"address": "host:port",
// "namespace": "..."}, once the server is ready, and stops when its
// standard input closes, so it ends with the process that started it.
//
// It is a module of its own: the server module's newest release that this
// toolchain builds (v1.32.1) pins go.temporal.io/api v1.63.5, and the SDK
// the temporal module uses (v1.51.0) needs v1.64.3, under which the
// server does not compile. The two talk over gRPC, which both versions
// speak.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"go.temporal.io/server/temporaltest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devserver:", err)
		os.Exit(1)
	}
}

func run() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the server failed: %v", r)
		}
	}()
	ts := temporaltest.NewServer()
	line, err := json.Marshal(map[string]string{"address": ts.GetFrontendHostPort(), "namespace": ts.GetDefaultNamespace()})
	if err != nil {
		return err
	}
	if _, err := fmt.Printf("%s\n", line); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	ts.Stop()
	return nil
}
