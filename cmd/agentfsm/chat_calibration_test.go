package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/internal/providertest"
)

// These tests run "agentfsm chat" against a stand-in of each provider that
// counts tokens as a real one does for code and CJK text: several times
// the chars/4 estimate. The stand-in computes its count of every request
// from the request's bytes, reports that count as the call's usage,
// answers an overflow in its own wording whenever the count is over the
// model's window, and otherwise answers from a script (or, for a summary
// request, with the longest summary the request allows).

// countingRatio is how many tokens the stand-in counts for every 4 bytes
// of a request or an answer: what code and CJK text count.
const countingRatio = 5

// countingWindow is the model's context window, in tokens by the
// stand-in's count (--context-window).
const countingWindow = 20000

// countedRequest is what the stand-in made of one request.
type countedRequest struct {
	// Tokens is the stand-in's count of the request.
	Tokens int
	// Overflowed is true when the stand-in answered an overflow.
	Overflowed bool
	// Summary is true when the request asked for a summary.
	Summary bool
	// Body is the request as sent.
	Body string
}

// countingAPI is a provider's fake behind a handler that scripts its
// replies from what each request holds.
type countingAPI struct {
	name, keyVar, baseURL string
	srv                   *providertest.Server

	mu       sync.Mutex
	answers  []string
	requests []countedRequest
}

// countTokens is the stand-in's count of n bytes: ceil(n/4 × ratio).
func countTokens(n int) int { return (n*countingRatio + 3) / 4 }

// summaryLimit finds the summary prompt's "Keep the summary under N
// characters".
var summaryLimit = regexp.MustCompile(`Keep the summary under (\d+) characters`)

func newCountingAPI(t *testing.T, name string, answers ...string) *countingAPI {
	api := &countingAPI{name: name, answers: answers}
	var reply func(text string, input, output int) providertest.Reply
	var overflow func(tokens int) providertest.Reply
	switch name {
	case "anthropic":
		api.keyVar, api.srv = "ANTHROPIC_API_KEY", providertest.NewAnthropic(t)
		reply = func(text string, input, output int) providertest.Reply {
			return providertest.AnthropicMessage{
				Content: []providertest.AnthropicBlock{providertest.AnthropicText(text)},
				Usage:   providertest.AnthropicUsage{InputTokens: int64(input), OutputTokens: int64(output)},
			}.Reply()
		}
		overflow = func(tokens int) providertest.Reply {
			return providertest.AnthropicPromptTooLong(tokens, countingWindow)
		}
	case "openai":
		api.keyVar, api.srv = "OPENAI_API_KEY", providertest.NewOpenAI(t)
		reply = func(text string, input, output int) providertest.Reply {
			return providertest.OpenAICompletion{
				Content: text,
				Usage:   providertest.OpenAIUsage{PromptTokens: int64(input), CompletionTokens: int64(output)},
			}.Reply()
		}
		overflow = func(tokens int) providertest.Reply {
			return providertest.OpenAIContextLengthExceeded(countingWindow, tokens)
		}
	default:
		t.Fatalf("no stand-in for %q", name)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		req := countedRequest{Tokens: countTokens(len(body)), Body: string(body)}
		limit := summaryLimit.FindSubmatch(body)
		req.Summary = limit != nil
		api.mu.Lock()
		switch {
		case req.Tokens > countingWindow:
			req.Overflowed = true
			api.srv.Push(overflow(req.Tokens))
		case req.Summary:
			n, err := strconv.Atoi(string(limit[1]))
			if err != nil || n <= 0 {
				t.Errorf("summary request with a limit of %q", limit[1])
				n = 100
			}
			text := longText("summary", n)
			api.srv.Push(reply(text, req.Tokens, countTokens(len(text))))
		case len(api.answers) == 0:
			t.Errorf("%s stand-in: request %d has no answer left", name, len(api.requests)+1)
			api.srv.Push(reply("no answer left", req.Tokens, 4))
		default:
			text := api.answers[0]
			api.answers = api.answers[1:]
			api.srv.Push(reply(text, req.Tokens, countTokens(len(text))))
		}
		api.requests = append(api.requests, req)
		api.mu.Unlock()
		api.srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	api.baseURL = ts.URL
	if name == "openai" {
		api.baseURL += "/v1/"
	}
	return api
}

// counted returns the requests the stand-in counted, in order.
func (api *countingAPI) counted() []countedRequest {
	api.mu.Lock()
	defer api.mu.Unlock()
	return append([]countedRequest(nil), api.requests...)
}

// longText is one line of exactly n bytes (n ≥ 0) that reads like code
// with CJK comments, tagged with tag so the test can find it in a
// request.
func longText(tag string, n int) string {
	var b strings.Builder
	b.WriteString(tag)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "; func %s%d(x int) int { return x*%d + 7 } // 计算第%d项的值", tag, i, i, i)
	}
	s := b.String()
	cut := n
	for !utf8.ValidString(s[:cut]) {
		cut--
	}
	return s[:cut] + strings.Repeat(" ", n-cut)
}

// TestChatBinaryCalibratedOverflowFits: the provider reports usage five
// times the chars/4 estimate (as code and CJK text count), and a file is
// pasted that the context cannot take as it is. The check before the
// prompt weighs the paste with the context by the calibrated count and
// compacts first, so the request that carries the paste fits by the
// provider's own count and nothing overflows; were one to overflow
// ("N tokens > 20000 maximum"), the continuation after the compaction
// would be smaller than it and fit. Uncalibrated, the session kept what
// chars/4 says is small, sent the paste, overflowed, and the continuation
// overflowed again. Issue 23 items 1 and 2, and the prompt's weight.
func TestChatBinaryCalibratedOverflowFits(t *testing.T) {
	settings := `{"retry":{"baseDelayMs":1},"compaction":{"reserveTokens":1000,"keepRecentTokens":2000}}`
	for _, name := range []string{"anthropic", "openai"} {
		t.Run(name, func(t *testing.T) {
			answer1, answer2 := longText("answerone", 6000), longText("answertwo", 6000)
			paste := longText("pasted", 6000)
			api := newCountingAPI(t, name, answer1, answer2, "The pasted file is fine.")
			args := []string{"chat", "--provider", name, "--base-url", api.baseURL, "--context-window", strconv.Itoa(countingWindow),
				"--settings", writeFile(t, "settings.json", settings), "--events"}
			cmd := exec.CommandContext(guard(t), binary(t), args...)
			cmd.Env = append(cleanEnv(), api.keyVar+"=test-key")
			stdin := "write the first part\nwrite the second part\nreview this file: " + paste + "\n"
			code, out, errOut := runChatCmd(t, cmd, stdin)
			reqs := api.counted()
			for i, r := range reqs {
				t.Logf("request %d: %d tokens, overflowed %v, summary %v", i+1, r.Tokens, r.Overflowed, r.Summary)
			}
			require.Equal(t, 0, code, "the end of stderr: %s", errOut[max(len(errOut)-1500, 0):])
			assert.Equal(t, answer1+"\n"+answer2+"\nThe pasted file is fine.\n", out)

			overflows := 0
			for i, r := range reqs {
				if !r.Overflowed {
					continue
				}
				overflows++
				require.Less(t, i+1, len(reqs), "a request follows the overflow")
				next := reqs[i+1:]
				// The continuation is the first request after the
				// overflow that is not the summary's.
				for len(next) > 0 && next[0].Summary {
					assert.False(t, next[0].Overflowed, "the summary request fits the window")
					next = next[1:]
				}
				require.NotEmpty(t, next, "a continuation follows the overflow")
				cont := next[0]
				assert.Contains(t, cont.Body, "pasted", "the continuation carries the pasted file")
				assert.Less(t, cont.Tokens, r.Tokens, "the continuation is smaller than the request that overflowed")
				assert.LessOrEqual(t, cont.Tokens, countingWindow, "the continuation fits by the provider's count")
				assert.False(t, cont.Overflowed)
			}
			assert.Zero(t, overflows, "the check before the paste compacts first: nothing overflows")
			var pasted []countedRequest
			for _, r := range reqs {
				if !r.Summary && strings.Contains(r.Body, "pasted") {
					pasted = append(pasted, r)
				}
			}
			require.NotEmpty(t, pasted, "the paste was sent")
			assert.LessOrEqual(t, pasted[0].Tokens, countingWindow, "the request with the paste fits by the provider's count")
			assert.Contains(t, errOut, `"type":"auto_compaction_end"`)
		})
	}
}

// TestChatBinaryCalibratedSummaryRequestFits: a file pasted into a chat
// that the provider counts far over the window fails its turn (too_large);
// the next invocation on the same history asks something else: the
// overflow's compaction summarizes the conversation and the paste, and
// every summary request fits the window by the provider's count (the
// conversation in pieces), so the turn recovers. Issue 23 item 3.
func TestChatBinaryCalibratedSummaryRequestFits(t *testing.T) {
	settings := `{"retry":{"baseDelayMs":1},"compaction":{"reserveTokens":1000,"keepRecentTokens":2000}}`
	for _, name := range []string{"anthropic", "openai"} {
		t.Run(name, func(t *testing.T) {
			answer1, answer2 := longText("answerone", 6000), longText("answertwo", 6000)
			api := newCountingAPI(t, name, answer1, answer2, "Moving on.")
			history := filepath.Join(t.TempDir(), "chat.jsonl")
			run := func(stdin string) (code int, out, tail string) {
				args := []string{"chat", "--provider", name, "--base-url", api.baseURL, "--context-window", strconv.Itoa(countingWindow),
					"--settings", writeFile(t, "settings.json", settings), "--events", "--history", history}
				cmd := exec.CommandContext(guard(t), binary(t), args...)
				cmd.Env = append(cleanEnv(), api.keyVar+"=test-key")
				code, out, errOut := runChatCmd(t, cmd, stdin)
				return code, out, errOut[max(len(errOut)-1500, 0):]
			}
			code, out, tail := run("write the first part\nwrite the second part\nreview this file: " + longText("pasted", 30000) + "\n")
			require.Equal(t, 1, code, "the paste alone is over the window: %s", tail)
			assert.Equal(t, answer1+"\n"+answer2+"\n", out)
			assert.Contains(t, tail, "the last message alone is")

			code, out, tail = run("let us move on\n")
			reqs := api.counted()
			for i, r := range reqs {
				t.Logf("request %d: %d tokens, overflowed %v, summary %v", i+1, r.Tokens, r.Overflowed, r.Summary)
			}
			for i, r := range reqs {
				if r.Summary {
					assert.LessOrEqual(t, r.Tokens, countingWindow, "summary request %d fits by the provider's count", i+1)
				}
			}
			require.Equal(t, 0, code, "the end of stderr: %s", tail)
			assert.Equal(t, "Moving on.\n", out)
		})
	}
}
