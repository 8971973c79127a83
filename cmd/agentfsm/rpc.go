package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
)

func runRPC(args []string, env *environment) int {
	fs := newFlagSet("rpc", "agentfsm rpc [--script FILE | --provider anthropic|openai [--model ID] [--base-url URL] [--context-window N]] [--settings FILE|reference]")
	scriptPath := fs.String("script", "", "the scripted agent's `file` (default: every call succeeds)")
	be := addBackendFlags(fs, false)
	settingsPath := fs.String("settings", "", settingsUsage)
	mode := fs.String("mode", "rpc", "accepted for compatibility with the reference agent; only rpc")
	if code := fs.parse(args, env); code >= 0 {
		return code
	}
	if *mode != "rpc" {
		fmt.Fprintf(env.stderr, "agentfsm rpc: unknown --mode %q (only rpc)\n", *mode)
		return 2
	}
	var (
		agent session.Agent
		model session.Model
	)
	if *be.provider != "" {
		if *scriptPath != "" {
			fmt.Fprintf(env.stderr, "agentfsm rpc: --script and --provider exclude each other\n")
			return 2
		}
		var err error
		if agent, model, err = be.agent(env.lookupEnv); err != nil {
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
			data, err := os.ReadFile(*scriptPath)
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
	cfg, err := loadSettings(*settingsPath)
	if err != nil {
		fmt.Fprintf(env.stderr, "agentfsm rpc: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(env.stderr, nil))
	s, err := session.New(agent, session.WithModel(model), session.WithConfig(cfg), session.WithLogger(logger))
	if err != nil {
		fmt.Fprintf(env.stderr, "agentfsm rpc: %v\n", err)
		return 2
	}
	defer s.Close()
	// SIGINT or SIGTERM ends the server as the end of stdin does: the turn
	// in flight is aborted and its events go out. A second signal kills.
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
