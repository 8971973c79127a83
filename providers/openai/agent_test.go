package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/providertest"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/providers/openai"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// run calls the agent directly and returns what it emitted.
func run(t *testing.T, fake *providertest.Server, tools []openai.Tool, ctx []transcript.Message) []events.Event {
	t.Helper()
	agent := openai.New(openai.Options{Model: "gpt-4o", BaseURL: fake.BaseURL(), HTTPClient: fake.Client(),
		Secrets: credentials.EnvSecrets{Lookup: lookup}, Tools: tools})
	var evs []events.Event
	require.NoError(t, agent.Run(context.Background(), session.RunRequest{Context: ctx}, func(ev events.Event) { evs = append(evs, ev) }))
	return evs
}

func kinds(evs []events.Event) []string {
	var out []string
	for _, ev := range evs {
		switch e := ev.(type) {
		case events.MessageUpdate:
			out = append(out, "update "+e.Delta.Kind)
		case events.MessageEnd:
			out = append(out, fmt.Sprintf("end %s %s", e.Message.Role, e.Message.StopReason))
		default:
			out = append(out, fmt.Sprintf("%T", ev)[len("events."):])
		}
	}
	return out
}

// Issue 13 item 2: the events of a run follow the agent contract, with
// the deltas as they arrive, and a tool's error is an isError result.
func TestOpenAIRunEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := providertest.NewOpenAI(t)
		fake.Push(
			providertest.OpenAICompletion{Content: "Let me look.", ToolCalls: []providertest.OpenAIToolCall{
				{ID: "call_1", Name: "fail", Arguments: `{}`},
				{ID: "call_2", Name: "missing", Arguments: `not json`},
			}}.Reply(),
			providertest.OpenAICompletion{Content: "Done", FinishReason: "length"}.Reply(),
		)
		fail := openai.Tool{Name: "fail", Run: func(context.Context, json.RawMessage) (string, error) { return "", errors.New("disk full") }}
		evs := run(t, fake, []openai.Tool{fail}, []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("go")}})
		assert.Equal(t, []string{
			"AgentStart", "CallStart", "MessageStart",
			"update text", "update text", "update text", "update toolCall", "update toolCall",
			"end assistant toolUse",
			"MessageStart", "end toolResult ", "MessageStart", "end toolResult ",
			"CallEnd", "CallStart", "MessageStart", "update text",
			"end assistant length", "CallEnd", "AgentEnd",
		}, kinds(evs))
		end := evs[len(evs)-1].(events.AgentEnd)
		require.Len(t, end.Messages, 4)
		first := end.Messages[0]
		assert.Equal(t, []transcript.Block{
			transcript.TextBlock("Let me look."),
			{Type: transcript.BlockToolCall, ID: "call_1", Name: "fail", Arguments: json.RawMessage(`{}`)},
			{Type: transcript.BlockToolCall, ID: "call_2", Name: "missing", Arguments: json.RawMessage(`{"_raw":"not json"}`)},
		}, first.Content)
		assert.True(t, end.Messages[1].ToolError)
		assert.Equal(t, "disk full", end.Messages[1].Text())
		assert.True(t, end.Messages[2].ToolError)
		assert.Contains(t, end.Messages[2].Text(), `no tool named "missing"`)
		assert.Equal(t, transcript.StopReasonLength, end.Messages[3].StopReason)
	})
}

// Issue 13 item 2: the context goes out in the API's shapes: images as
// data URLs, the summary as a user message, thinking and failed calls left
// out.
func TestOpenAIRequestMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := providertest.NewOpenAI(t)
		fake.Push(completion("fine"))
		ctx := []transcript.Message{
			{Role: transcript.RoleSummary, Content: transcript.TextContent("earlier: the user asked about Go")},
			{Role: transcript.RoleUser, Content: []transcript.Block{transcript.TextBlock("what is this?"), {Type: transcript.BlockImage, Data: "aGk=", MimeType: "image/png"}}},
			{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError, ErrorMessage: "503"},
			{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonToolUse, Content: []transcript.Block{
				{Type: transcript.BlockThinking, Thinking: "hmm", ThinkingSignature: "sig"},
				transcript.TextBlock("Looking."),
				{Type: transcript.BlockToolCall, ID: "c1", Name: "shot", Arguments: json.RawMessage(`{"x":1}`)},
				{Type: transcript.BlockToolCall, ID: "c2", Name: "lost"},
			}},
			{Role: transcript.RoleToolResult, ToolCallID: "c1", ToolName: "shot", Content: []transcript.Block{transcript.TextBlock("taken"), {Type: transcript.BlockImage, Data: "aGk=", MimeType: "image/jpeg"}}},
			{Role: transcript.RoleToolResult, ToolCallID: "zz", ToolName: "orphan", Content: transcript.TextContent("?")},
		}
		run(t, fake, nil, ctx)
		reqs := fake.Settled()
		require.Len(t, reqs, 1)
		var body struct {
			Messages json.RawMessage `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(reqs[0].Raw, &body))
		assert.JSONEq(t, `[
			{"role":"user","content":"The conversation before this point was compacted into this summary:\n\nearlier: the user asked about Go"},
			{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,aGk="}}]},
			{"role":"assistant","content":"Looking.","tool_calls":[{"id":"c1","type":"function","function":{"name":"shot","arguments":"{\"x\":1}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"taken"},
			{"role":"user","content":[{"type":"text","text":"The images the tools returned:"},{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,aGk="}}]}
		]`, string(body.Messages))
	})
}

// Issue 13 item 2: a server that streams reasoning gives a thinking block;
// an empty-choices chunk before the end, and another choice, are skipped.
func TestOpenAIReasoningAndEmptyChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := providertest.NewOpenAI(t)
		stream := []providertest.Event{
			{Data: `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[]}`},
			{Data: `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"think"}}]}`},
			{Data: `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":1,"delta":{"content":"other choice"}}]}`},
			{Data: `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}`},
			providertest.OpenAIDone,
		}
		fake.Push(providertest.Reply{Events: stream})
		evs := run(t, fake, nil, []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("go")}})
		end := evs[len(evs)-1].(events.AgentEnd)
		require.Len(t, end.Messages, 1)
		m := end.Messages[0]
		assert.Equal(t, []transcript.Block{{Type: transcript.BlockThinking, Thinking: "think", ThinkingSignature: "reasoning_content"}, transcript.TextBlock("Hi")}, m.Content,
			"the signature names the field the reasoning came in")
		assert.Equal(t, transcript.StopReasonStop, m.StopReason)
		assert.Nil(t, m.Usage, "no usage chunk came")
	})
}

// Issue 13 item 2: Model names the provider, the ID and its window, from
// the user's table first.
func TestOpenAIModelContextWindow(t *testing.T) {
	assert.Equal(t, policy.Model{Provider: "openai", ID: "gpt-4o-2024-08-06", ContextWindow: 128_000},
		openai.New(openai.Options{Model: "gpt-4o-2024-08-06"}).Model())
	assert.Equal(t, 1_047_576, openai.New(openai.Options{Model: "gpt-4.1-mini"}).Model().ContextWindow)
	m := openai.New(openai.Options{Model: "llama3.2", Provider: "ollama", BaseURL: "http://localhost:11434/v1/",
		ContextWindows: map[string]int{"llama3.2": 131_072}}).Model()
	assert.Equal(t, policy.Model{Provider: "ollama", ID: "llama3.2", ContextWindow: 131_072, BaseURL: "http://localhost:11434/v1/"}, m)
	assert.Zero(t, openai.New(openai.Options{Model: "unknown"}).Model().ContextWindow)
}

// Issue 13 item 2: a tool whose schema is not a JSON object stops the run
// before it starts.
func TestOpenAIBadToolSchemaFailsToStart(t *testing.T) {
	agent := openai.New(openai.Options{Model: "gpt-4o", Secrets: credentials.EnvSecrets{Lookup: lookup},
		Tools: []openai.Tool{{Name: "t", Schema: json.RawMessage(`[1]`), Run: func(context.Context, json.RawMessage) (string, error) { return "", nil }}}})
	emitted := false
	err := agent.Run(context.Background(), session.RunRequest{}, func(events.Event) { emitted = true })
	require.Error(t, err)
	assert.Contains(t, err.Error(), `openai: tool "t": the schema is not a JSON object`)
	assert.False(t, emitted)
}

// Issue 13 item 2: an error body that is not OpenAI's shape (Ollama's
// {"error":"…"}, a proxy's HTML page) keeps the HTTP status and headers,
// so the session still classifies the failure by them.
func TestOpenAIForeignErrorBodiesKeepStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := providertest.NewOpenAI(t)
		fake.Push(
			providertest.Reply{Status: 503, Header: http.Header{"Retry-After": {"3"}}, Body: []byte(`{"error":"model is loading"}`)},
			providertest.Reply{Status: 502, Header: http.Header{"Content-Type": {"text/html"}}, Body: []byte("<html><body>Bad Gateway</body></html>")},
		)
		want := []struct {
			status int
			text   string
		}{{503, "503 model is loading"}, {502, "502 <html><body>Bad Gateway</body></html>"}}
		for _, w := range want {
			evs := run(t, fake, nil, []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("go")}})
			m := evs[len(evs)-1].(events.AgentEnd).Messages[0]
			assert.Equal(t, transcript.StopReasonError, m.StopReason)
			assert.Equal(t, w.status, m.HTTPStatus)
			assert.Equal(t, w.text, m.ErrorMessage)
			assert.NotEmpty(t, m.Headers["x-request-id"])
		}
	})
}

// Issue 13 item 2: the set options and the resolved key win over the
// SDK's OPENAI_* environment.
func TestOpenAIOptionsOverrideEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_BASE_URL", "http://elsewhere.test/v1/")
	synctest.Test(t, func(t *testing.T) {
		fake := providertest.NewOpenAI(t)
		fake.Push(completion("ok"))
		run(t, fake, nil, []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("go")}})
		reqs := fake.Settled()
		require.Len(t, reqs, 1)
		assert.Equal(t, secrets["OPENAI_API_KEY"], reqs[0].Key(), "the resolved key, not the environment's")
		assert.Empty(t, reqs[0].Rejected)
	})
}

// Issue 13 item 2: one agent serves several sessions at once.
func TestOpenAIAgentSharedBySessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := providertest.NewOpenAI(t)
		const n = 4
		for range n {
			fake.Push(completion("ok"))
		}
		agent := openai.New(openai.Options{Model: "gpt-4o", BaseURL: fake.BaseURL(), HTTPClient: fake.Client(),
			Secrets: credentials.EnvSecrets{Lookup: lookup}})
		errs := make(chan error, n)
		for i := range n {
			s, err := session.New(agent, session.WithModel(agent.Model()), session.WithSessionID(fmt.Sprint("s", i)))
			require.NoError(t, err)
			defer s.Close()
			go func() { errs <- s.Prompt(context.Background(), "hi") }()
		}
		for range n {
			require.NoError(t, <-errs)
		}
		assert.Len(t, fake.Settled(), n)
	})
}

// Issue item 4: the spend and quota codes reach the classifier as the
// message's error type, which decides before the text.
func TestOpenAISpendCodesAreTyped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := providertest.NewOpenAI(t)
		fake.Push(providertest.OpenAIInsufficientQuota(),
			providertest.OpenAIError(400, "invalid_request_error", "billing_hard_limit_reached", "", "Billing hard limit has been reached"))
		for _, typ := range []string{"insufficient_quota", "billing_hard_limit_reached"} {
			evs := run(t, fake, nil, []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("go")}})
			m := evs[len(evs)-1].(events.AgentEnd).Messages[0]
			assert.Equal(t, typ, m.ErrorType)
			typed := classify.Message{StopReason: m.StopReason, Status: m.HTTPStatus, ErrorType: m.ErrorType}
			assert.Equal(t, classify.UsageLimit, classify.Extended.Classify(typed, time.Now()).Class, typ)
			assert.True(t, classify.Seed.Classify(typed, time.Now()).UsageLimit, typ)
		}
	})
}

// Issue item 3: a model's reasoning goes back to that model in the field
// it came in (DeepSeek's reasoning_content, which it requires after a tool
// call; OpenRouter's and Ollama's reasoning); another model's thinking,
// and Anthropic's signed thinking, is not sent.
func TestOpenAIReasoningGoesBackToItsModel(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		t.Run(field, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := providertest.NewOpenAI(t)
				chunk := func(delta, finish string) providertest.Event {
					return providertest.Event{Data: `{"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`}
				}
				fake.Push(providertest.Reply{Events: []providertest.Event{
					chunk(`{"role":"assistant","`+field+`":"I should read "}`, "null"),
					chunk(`{"`+field+`":"main.go."}`, "null"),
					chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":"{}"}}]}`, "null"),
					chunk(`{}`, `"tool_calls"`),
					providertest.OpenAIDone,
				}}, completion("done"))
				read := openai.Tool{Name: "read", Run: func(context.Context, json.RawMessage) (string, error) { return "package main", nil }}
				earlier := []transcript.Message{
					{Role: transcript.RoleUser, Content: transcript.TextContent("before")},
					{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Provider: "openai", Model: "other-model", Content: []transcript.Block{
						{Type: transcript.BlockThinking, Thinking: "another model's thought", ThinkingSignature: field}, transcript.TextBlock("other")}},
					{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Provider: "anthropic", Model: "gpt-4o", Content: []transcript.Block{
						{Type: transcript.BlockThinking, Thinking: "signed thought", ThinkingSignature: "EqQBCkYIBxgCKkBs"}, transcript.TextBlock("signed")}},
					// Its own reasoning with no answer and no call: no message.
					{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonLength, Provider: "openai", Model: "gpt-4o", Content: []transcript.Block{
						{Type: transcript.BlockThinking, Thinking: "cut short", ThinkingSignature: field}}},
					{Role: transcript.RoleUser, Content: transcript.TextContent("read main.go")},
				}
				run(t, fake, []openai.Tool{read}, earlier)
				reqs := fake.Settled()
				require.Len(t, reqs, 2)
				sent := reqs[1].Body["messages"].([]any)
				require.Len(t, sent, 6)
				for _, i := range []int{1, 2} {
					assert.NotContains(t, sent[i], field, "no thinking of another model")
					assert.NotContains(t, sent[i], "reasoning_content")
				}
				call := sent[4].(map[string]any)
				assert.Equal(t, "assistant", call["role"])
				assert.Equal(t, "I should read main.go.", call[field], "the model's own reasoning, in its field")
				assert.NotNil(t, call["tool_calls"])
			})
		})
	}
}

// Issue 25 §1: a run calls the model its request names when it is of the
// agent's provider (a session's fallback model), whatever Options.Model
// says, and its messages name it; another provider's model leaves
// Options.Model in place.
func TestOpenAIRunCallsTheRequestsModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := providertest.NewOpenAI(t)
		fake.Push(providertest.OpenAICompletion{Content: "a"}.Reply(), providertest.OpenAICompletion{Content: "b"}.Reply())
		agent := openai.New(openai.Options{Model: "gpt-4o", BaseURL: fake.BaseURL(), HTTPClient: fake.Client(), Secrets: credentials.EnvSecrets{Lookup: lookup}})
		ctx := []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hi")}}
		var last transcript.Message
		emit := func(ev events.Event) {
			if e, ok := ev.(events.MessageEnd); ok {
				last = e.Message
			}
		}
		fallback := agent.Model()
		fallback.ID = "gpt-4o-mini"
		require.NoError(t, agent.Run(context.Background(), session.RunRequest{Context: ctx, Model: fallback}, emit))
		assert.Equal(t, "gpt-4o-mini", last.Model)
		require.NoError(t, agent.Run(context.Background(), session.RunRequest{Context: ctx, Model: policy.Model{Provider: "elsewhere", ID: "x"}}, emit))
		assert.Equal(t, "gpt-4o", last.Model)
		reqs := fake.Requests()
		require.Len(t, reqs, 2)
		assert.Equal(t, "gpt-4o-mini", reqs[0].Body["model"])
		assert.Equal(t, "gpt-4o", reqs[1].Body["model"])
	})
}
