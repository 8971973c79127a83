package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// maxScriptSize is the largest --script file runRPC reads: as large as the
// largest command line the server reads (64 MiB), so that a script can answer with
// any text the wire carries, and no larger, so that an endless file
// (--script /dev/zero) is refused instead of read until memory runs out.
const maxScriptSize = 64 << 20

func runRPC(args []string, env *environment) int {
	fs := newFlagSet("rpc", "agentfsm rpc [--script FILE | --provider anthropic|openai [--model ID] [--base-url URL] [--context-window N]] "+
		"[--settings FILE|reference|patient] [--summarizer digest|model] [--log-level LEVEL]\n\n"+
		"Commands come in on stdin, one JSON object a line; responses and events go out on stdout\n"+
		"(docs/rpc.md). At the end of stdin the turn in flight settles and its events go out before\n"+
		"rpc exits; SIGINT or SIGTERM aborts it. Try:\n"+
		"  echo '{\"type\":\"prompt\",\"message\":\"hi\"}' | agentfsm rpc --script docs/examples/overflow.script.json")
	scriptPath := fs.String("script", "", "the scripted agent's `file`: {\"model\":{…},\"calls\":[{\"stopReason\":\"error\",\"errorMessage\":\"503\"},…]},\n"+
		"one entry a model call (docs/rpc.md, \"The script\"; docs/examples/overflow.script.json) (default: every call succeeds)")
	be := addBackendFlags(fs, false)
	settingsPath := fs.String("settings", "", settingsHelp)
	summarizer := fs.String("summarizer", "", summarizerHelp+" (default: model with --provider, digest without)")
	mode := fs.String("mode", "rpc", "accepted for compatibility with the pi coding agent, spawned as --mode rpc; only rpc")
	tel := addTelemetryFlags(fs)
	if code := fs.parse(args, env); code >= 0 {
		return code
	}
	if *mode != "rpc" {
		fmt.Fprintf(env.stderr, "agentfsm rpc: unknown --mode %q (only rpc)\n", *mode)
		return 2
	}
	summarizerName, err := be.summarizerName(fs, *summarizer)
	if err != nil {
		fmt.Fprintf(env.stderr, "agentfsm rpc: %v\n", err)
		return 2
	}
	set, err := loadSettings(*settingsPath)
	if err != nil {
		fmt.Fprintf(env.stderr, "agentfsm rpc: %v\n", err)
		return 2
	}
	var (
		agent session.Agent
		model policy.Model
	)
	if *be.provider != "" {
		if *scriptPath != "" {
			fmt.Fprintf(env.stderr, "agentfsm rpc: --script and --provider exclude each other\n")
			return 2
		}
		if agent, model, err = be.agent(env.lookupEnv, nil, len(set.credentials) > 0); err != nil {
			fmt.Fprintf(env.stderr, "agentfsm rpc: %v\n", err)
			return 2
		}
	} else {
		if *be.model != "" || *be.baseURL != "" || *be.contextWindow != 0 {
			fmt.Fprintf(env.stderr, "agentfsm rpc: --model, --base-url and --context-window need --provider\n")
			return 2
		}
		script := scripted.Script{Model: scripted.DefaultModel}
		if *scriptPath != "" {
			data, err := readBounded(*scriptPath, maxScriptSize, "script")
			if err != nil {
				fmt.Fprintf(env.stderr, "agentfsm rpc: --script: %v\n", err)
				return 2
			}
			if script, err = scripted.Parse(data); err != nil {
				fmt.Fprintf(env.stderr, "agentfsm rpc: --script %s: %v\n", *scriptPath, err)
				return 2
			}
		}
		agent, model = scripted.New(script), script.Model
	}
	creds, err := set.store(model.Provider, env.lookupEnv)
	if err != nil {
		fmt.Fprintf(env.stderr, "agentfsm rpc: --settings: %v\n", err)
		return 2
	}
	if err := tel.start(env, "agentfsm"); err != nil {
		fmt.Fprintf(env.stderr, "agentfsm rpc: %v\n", err)
		return 2
	}
	defer tel.shutdown()
	logger := slog.New(slog.NewTextHandler(env.stderr, nil))
	opts := []session.Option{session.WithModel(model), session.WithConfig(set.config), session.WithLogger(logger)}
	if creds != nil {
		opts = append(opts, session.WithCredentials(creds))
	}
	summary, err := be.summarizer(summarizerName, env.lookupEnv)
	if err != nil {
		fmt.Fprintf(env.stderr, "agentfsm rpc: %v\n", err)
		return 2
	}
	opts = append(opts, summary...)
	s, err := session.New(agent, append(opts, tel.options()...)...)
	if err != nil {
		fmt.Fprintf(env.stderr, "agentfsm rpc: %v\n", err)
		return 2
	}
	defer s.Close()
	tel.attach(s)
	// The end of stdin lets the turn in flight settle (a file of
	// commands piped in is served to its end); SIGINT or SIGTERM, then or
	// before, aborts it and ends the server: its events go out. A second
	// signal kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := rpc.Serve(ctx, s, env.stdin, env.stdout); err != nil {
		fmt.Fprintf(env.stderr, "agentfsm %v\n", err) // "agentfsm rpc: writing output: …"
		return 1
	}
	return 0
}
