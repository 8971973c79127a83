// Command agentfsm shows the recovery machine at work and gives it to other
// programs: a demo of its scenarios (the default), a chat with a real model
// (Anthropic, or any OpenAI-compatible server), a JSON-lines RPC server, its
// error classifier, its state diagram, and the recovery story of a
// session's history file.
//
// Usage:
//
//	agentfsm [<subcommand>] [flags]
//
// Without a subcommand, the demo runs, and its flags work without its name
// ("agentfsm --list"). Run "agentfsm -h" for the list of subcommands and
// "agentfsm <subcommand> -h" for each one's flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string, env *environment) int
}

// environment is what a subcommand reads and writes, so tests can run the
// command in process.
type environment struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	now    func() time.Time
	// getenv replaces os.LookupEnv when set.
	getenv func(name string) (string, bool)
}

func commands() []command {
	return []command{
		{"demo", "play recovery scenarios on the scripted agent (the default)", runDemo},
		{"chat", "talk to a real model (Anthropic or OpenAI-compatible) under the recovery policy", runChat},
		{"rpc", "serve a session over JSON lines on stdin and stdout", runRPC},
		{"classify", "classify error messages read from stdin, one JSON line out per line in (exit 1 if one was refused)", runClassify},
		{"diagram", "print the state diagram built from the transition table", runDiagram},
		{"inspect", "tell a session's recovery story from its history file (chat --history)", runInspect},
	}
}

func main() {
	os.Exit(run(os.Args[1:], &environment{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, now: time.Now}))
}

// run executes the command line args and returns the exit code: 0 on success,
// 1 when the work failed, 2 on a usage error.
func run(args []string, env *environment) int {
	if len(args) == 0 {
		return runDemo(nil, env)
	}
	name := args[0]
	if name == "--mode" || strings.HasPrefix(name, "--mode=") || name == "-mode" || strings.HasPrefix(name, "-mode=") {
		// Where the reference agent is spawned as "--mode rpc".
		return runRPC(args, env)
	}
	if name == "-h" || name == "-help" || name == "--help" || name == "help" {
		usage(env.stdout)
		return 0
	}
	if strings.HasPrefix(name, "-") {
		// A flag first: the default subcommand's ("agentfsm --list").
		return runDemo(args, env)
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(args[1:], env)
		}
	}
	fmt.Fprintf(env.stderr, "agentfsm: unknown subcommand %q (run agentfsm -h for the list)\n", name)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: agentfsm [<subcommand>] [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Subcommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Without a subcommand the demo runs, with its flags ("agentfsm --list").`)
	fmt.Fprintln(w, `Run "agentfsm <subcommand> -h" for a subcommand's flags.`)
}

// flagSet is a subcommand's flags with its synopsis line. It reports its own
// errors (parse) instead of letting package flag print them.
type flagSet struct {
	*flag.FlagSet
	synopsis string
}

func newFlagSet(name, synopsis string) flagSet {
	fs := flag.NewFlagSet("agentfsm "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return flagSet{fs, synopsis}
}

// parse parses args. It returns -1 to go on, or the exit code: 0 after
// printing usage for -h, 2 after a one-line reason for a bad flag or a stray
// argument.
func (fs flagSet) parse(args []string, env *environment) int {
	if code := fs.parseArgs(args, env); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "%s: unexpected argument %q (run %s -h for usage)\n", fs.Name(), fs.Arg(0), fs.Name())
		return 2
	}
	return -1
}

// parseArgs is parse for a subcommand that takes arguments after its
// flags (fs.Args).
func (fs flagSet) parseArgs(args []string, env *environment) int {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.printUsage(env.stdout)
		return 0
	case err != nil:
		fmt.Fprintf(env.stderr, "%s: %v (run %s -h for usage)\n", fs.Name(), err, fs.Name())
		return 2
	}
	return -1
}

func (fs flagSet) printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\nFlags:\n", fs.synopsis)
	fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(help, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}
