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
	fs := newFlagSet("rpc", "agentfsm rpc [--script FILE] [--settings FILE]")
	scriptPath := fs.String("script", "", "the scripted agent's `file` (default: every call succeeds)")
	settingsPath := fs.String("settings", "", "a settings `file`: {\"retry\":{…},\"compaction\":{…}}")
	mode := fs.String("mode", "rpc", "accepted for compatibility with the reference agent; only rpc")
	if code := fs.parse(args, env); code >= 0 {
		return code
	}
	if *mode != "rpc" {
		fmt.Fprintf(env.stderr, "agentfsm rpc: unknown --mode %q (only rpc)\n", *mode)
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
	cfg := session.DefaultConfig()
	if *settingsPath != "" {
		data, err := os.ReadFile(*settingsPath)
		if err != nil {
			fmt.Fprintf(env.stderr, "agentfsm rpc: --settings: %v\n", err)
			return 2
		}
		if cfg, err = session.ParseConfig(data); err != nil {
			fmt.Fprintf(env.stderr, "agentfsm rpc: --settings %s: %v\n", *settingsPath, err)
			return 2
		}
	}
	logger := slog.New(slog.NewTextHandler(env.stderr, nil))
	s, err := session.New(scripted.New(script), session.WithModel(script.Model), session.WithConfig(cfg), session.WithLogger(logger))
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
