package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/providers/anthropic"
	"github.com/agentfsm/agentfsm/providers/openai"
	"github.com/agentfsm/agentfsm/session"
)

// defaultOpenAIModel is the model of "--provider openai" without --model.
const defaultOpenAIModel = "gpt-4o-mini"

// backend is the flags that choose a real model: the provider, its model,
// where it is served and its context window.
type backend struct {
	provider      *string
	model         *string
	baseURL       *string
	contextWindow *int
}

// addBackendFlags adds the backend's flags to fs; required says whether
// --provider must be given (chat) or chooses between the scripted agent
// and a real one (rpc).
func addBackendFlags(fs flagSet, required bool) backend {
	help := "the model's `provider`: anthropic or openai (any OpenAI-compatible server, with --base-url)"
	if !required {
		help += "; the scripted agent when empty"
	}
	return backend{
		provider: fs.String("provider", "", help),
		model: fs.String("model", "", "the model `id` (default "+anthropic.DefaultModel+" for anthropic, "+
			defaultOpenAIModel+" for openai)"),
		baseURL: fs.String("base-url", "", "the API's base `url` (an OpenAI-compatible server's ends in /v1/)"),
		contextWindow: fs.Int("context-window", 0,
			"the model's context window in `tokens`, for threshold compaction (default: the provider's table; 0 there turns it off)"),
	}
}

// summarizerHelp is the --summarizer flag's help, before its default.
const summarizerHelp = "how a compaction summarizes: `digest|model` (digest writes a digest of the messages locally, " +
	"with no model; model asks the session's model: the same provider, model and key, without tools)"

// summarizerName is the summarizer --summarizer chose: name when the flag
// was given, else model with a provider and digest without. It returns an
// error for a name that is neither, and for model without a provider.
func (b backend) summarizerName(fs flagSet, name string) (string, error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "summarizer" })
	if !given {
		if *b.provider != "" {
			return "model", nil
		}
		return "digest", nil
	}
	switch {
	case name != "digest" && name != "model":
		return "", fmt.Errorf("--summarizer %q: want digest or model", name)
	case name == "model" && *b.provider == "":
		return "", errors.New("--summarizer model needs --provider: the scripted agent has no model to summarize with")
	}
	return name, nil
}

// summarizer returns the session options of the summarizer name (digest
// or model, as summarizerName returns): none for the digest, the
// session's default; for model, an AgentSummarizer over an agent of the
// flags' provider and model without tools, which calls with the key the
// session's runs use (the summary request's credential, or the
// environment's).
func (b backend) summarizer(name string, lookup func(string) (string, bool)) ([]session.Option, error) {
	if name != "model" {
		return nil, nil
	}
	agent, _, err := b.agent(lookup, nil, true)
	if err != nil {
		return nil, err
	}
	return []session.Option{session.WithSummarizer(session.AgentSummarizer{Agent: agent})}, nil
}

// agent returns the agent and its model the flags name, with tools. The
// API key is resolved now, from the environment, so a missing one is a
// usage error before any turn, unless keyed (the settings name the
// credentials, whose variables are checked on their own); the agent
// resolves it again at each call (it never holds it).
func (b backend) agent(lookup func(string) (string, bool), tools []tool, keyed bool) (session.Agent, policy.Model, error) {
	if *b.contextWindow < 0 {
		return nil, policy.Model{}, fmt.Errorf("--context-window must not be negative, got %d", *b.contextWindow)
	}
	secrets := credentials.EnvSecrets{Lookup: lookup}
	model := *b.model
	var windows map[string]int
	setWindow := func(id string) {
		if *b.contextWindow > 0 {
			windows = map[string]int{id: *b.contextWindow}
		}
	}
	var (
		agent interface {
			session.Agent
			Model() policy.Model
		}
		provider string
	)
	switch *b.provider {
	case anthropic.Provider:
		if model == "" {
			model = anthropic.DefaultModel
		}
		setWindow(model)
		provider = anthropic.Provider
		agent = anthropic.New(anthropic.Options{Model: model, BaseURL: *b.baseURL, Secrets: secrets, ContextWindows: windows,
			Tools: anthropicTools(tools)})
	case openai.DefaultProvider:
		if model == "" {
			model = defaultOpenAIModel
		}
		setWindow(model)
		provider = openai.DefaultProvider
		agent = openai.New(openai.Options{Model: model, BaseURL: *b.baseURL, Secrets: secrets, ContextWindows: windows,
			Tools: openaiTools(tools)})
	case "":
		return nil, policy.Model{}, fmt.Errorf("--provider is required: anthropic or openai")
	default:
		return nil, policy.Model{}, fmt.Errorf("unknown --provider %q: anthropic or openai", *b.provider)
	}
	if !keyed {
		if _, err := secrets.Resolve(context.Background(), policy.Credential{Provider: provider}); err != nil {
			return nil, policy.Model{}, fmt.Errorf("no API key: %s", missingKey(provider))
		}
	}
	return agent, agent.Model(), nil
}

// missingKey says how to give provider's key.
func missingKey(provider string) string {
	if provider == anthropic.Provider {
		return "set ANTHROPIC_API_KEY"
	}
	return "set OPENAI_API_KEY (any value for a local server that needs none)"
}

// lookupEnv is env's environment: os.LookupEnv unless a test set one.
func (env *environment) lookupEnv(name string) (string, bool) {
	if env.getenv != nil {
		return env.getenv(name)
	}
	return os.LookupEnv(name)
}
