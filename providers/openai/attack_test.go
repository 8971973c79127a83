package openai_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
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

// wholeStream is an answer "ok".
const wholeStream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":null}]}\n\n" +
	"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"

// classOf is the class of m under the extended rules.
func classOf(m transcript.Message) string {
	cm := classify.Message{StopReason: m.StopReason, ErrorMessage: m.ErrorMessage, Status: m.HTTPStatus,
		ErrorType: m.ErrorType, Headers: m.Headers, Err: m.Err, ContextWindow: 128000}
	return classify.Extended.Classify(cm, time.Now()).Class.String()
}

// runOnce runs a once, outside a session, and returns its last message.
func runOnce(t *testing.T, a *openai.Agent) transcript.Message {
	t.Helper()
	var evs []events.Event
	require.NoError(t, a.Run(context.Background(), session.RunRequest{Context: []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hi")}}},
		func(ev events.Event) { evs = append(evs, ev) }))
	ms := evs[len(evs)-1].(events.AgentEnd).Messages
	return ms[len(ms)-1]
}

// A 200 that is a document, not the stream asked for: an error object (a
// compatible server's or a proxy's, with its 200) is read as an error
// chunk is, so a context too long is an overflow and a bad key fatal
// (before, each was "the stream ended before the model finished",
// retried); a page fails with an error naming what came. A body marked
// JSON that is an event stream is still read as one.
func TestDocumentInPlaceOfStream(t *testing.T) {
	for name, tc := range map[string]struct {
		contentType, body string
		class, message    string
	}{
		"context too long": {"application/json", `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			"overflow", "context_length_exceeded: This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages."},
		"bad key": {"application/json; charset=utf-8", `{"error":{"message":"Incorrect API key provided: sk-*****1234.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			"fatal", "invalid_api_key: Incorrect API key provided: sk-*****1234."},
		"Ollama's error": {"application/json", `{"error":"model \"llama9\" not found, try pulling it first"}`,
			"fatal", `model "llama9" not found, try pulling it first`},
		"a page": {"text/html", "\r\n<!doctype html><title>Access denied</title>",
			"fatal", "openai: the server answered 200 with a document (text/html), not an event stream: <!doctype html><title>Access denied</title>"},
		"an error object marked as a stream": {"text/event-stream", `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			"overflow", "context_length_exceeded: This model's maximum context length is 128000 tokens."},
		"a stream marked JSON": {"application/json", wholeStream, "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := rawRun(t, context.Background(), openai.Options{}, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", tc.contentType)
					_, _ = w.Write([]byte(tc.body))
				})
				if tc.class == "" {
					assert.Equal(t, transcript.StopReasonStop, m.StopReason, m.ErrorMessage)
					assert.Equal(t, []transcript.Block{transcript.TextBlock("ok")}, m.Content)
					return
				}
				assert.Equal(t, transcript.StopReasonError, m.StopReason)
				assert.Equal(t, tc.message, m.ErrorMessage)
				assert.Equal(t, tc.class, classOf(m), m.ErrorMessage)
				assert.False(t, providertest.HoldsHTTP(m.Err))
			})
		})
	}
}

// A base URL with a password that does not parse, from Options or
// OPENAI_BASE_URL, fails the call with an error that masks the password
// (before, the error quoted the URL whole into the message and its
// history).
func TestBrokenBaseURLHidesItsPassword(t *testing.T) {
	for _, fromEnv := range []bool{false, true} {
		for _, base := range []string{"https://user:s3cret-pass@openai.test/v1/%zz", "https://user:s3cret-pass@open ai.test/v1/"} {
			opts := openai.Options{Model: "gpt-4o", Secrets: credentials.EnvSecrets{Lookup: lookup}, HTTPClient: providertest.Client(http.NotFoundHandler())}
			if fromEnv {
				t.Setenv("OPENAI_BASE_URL", base)
			} else {
				opts.BaseURL = base
			}
			m := runOnce(t, openai.New(opts))
			require.Equal(t, transcript.StopReasonError, m.StopReason)
			assert.NotContains(t, m.ErrorMessage, "s3cret")
			assert.NotContains(t, m.Err.Error(), "s3cret")
			assert.Contains(t, m.ErrorMessage, "openai: the base URL")
			assert.Contains(t, m.ErrorMessage, "xxxxx@")
		}
	}
}

// A redirect from https to plain http, to another port or to a subdomain
// does not carry the key along: Go's client keeps Authorization on each
// (before, the key went along, in the clear for http); a redirect within
// the origin keeps it.
func TestRedirectLeavingTheOriginDropsTheKey(t *testing.T) {
	for target, keep := range map[string]bool{
		"http://openai.test/v1/chat/completions":       false,
		"https://openai.test:8443/v1/chat/completions": false,
		"https://eu.openai.test/v1/chat/completions":   false,
		"https://elsewhere.test/v1/chat/completions":   false,
		"https://openai.test:443/v2/chat/completions":  true,
	} {
		t.Run(target, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got []string
				handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.String() == "https://openai.test/v1/chat/completions" {
						http.Redirect(w, r, target, http.StatusTemporaryRedirect)
						return
					}
					got = append(got, r.Header.Get("Authorization"))
					_, _ = w.Write([]byte(wholeStream))
				})
				m := runOnce(t, openai.New(openai.Options{Model: "gpt-4o", BaseURL: "https://openai.test/v1/", HTTPClient: providertest.Client(handler),
					Secrets: credentials.EnvSecrets{Lookup: lookup}}))
				assert.Equal(t, transcript.StopReasonStop, m.StopReason, m.ErrorMessage)
				want := ""
				if keep {
					want = "Bearer " + secrets["OPENAI_API_KEY"]
				}
				assert.Equal(t, []string{want}, got)
			})
		})
	}
}

func gzipped(t *testing.T, s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// loopbackAgent is an agent calling handler on a loopback server through
// transport (whose idle connections are closed at the end).
func loopbackAgent(t *testing.T, handler http.HandlerFunc, transport *http.Transport) *openai.Agent {
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	t.Cleanup(transport.CloseIdleConnections)
	return openai.New(openai.Options{Model: "gpt-4o", BaseURL: srv.URL + "/v1/", HTTPClient: &http.Client{Transport: transport},
		Secrets: credentials.EnvSecrets{Lookup: lookup}})
}

// A gzip-encoded answer is read whether the client asked for it (Go's
// transport inflates it) or not (a transport with DisableCompression gets
// it as sent, which the adapter now inflates; before, it failed as a
// stream without a finish reason, retried); so is a gzip error body, whose
// class is then its own.
func TestGzipAnswers(t *testing.T) {
	overflow := `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	for name, tc := range map[string]struct {
		status       int
		body         []byte
		disable      bool
		class, words string
	}{
		"asked":               {200, gzipped(t, wholeStream), false, "", ""},
		"not asked":           {200, gzipped(t, wholeStream), true, "", ""},
		"error not asked":     {400, gzipped(t, overflow), true, "overflow", "400 context_length_exceeded: This model's maximum context length"},
		"not gzip, not asked": {200, []byte(wholeStream), true, "fatal", "sse: the body is marked gzip but is not"},
	} {
		t.Run(name, func(t *testing.T) {
			a := loopbackAgent(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Content-Encoding", "gzip")
				w.WriteHeader(tc.status)
				_, _ = w.Write(tc.body)
			}, &http.Transport{DisableCompression: tc.disable})
			m := runOnce(t, a)
			if tc.class == "" {
				assert.Equal(t, transcript.StopReasonStop, m.StopReason, m.ErrorMessage)
				assert.Equal(t, []transcript.Block{transcript.TextBlock("ok")}, m.Content)
				return
			}
			assert.Contains(t, m.ErrorMessage, tc.words)
			assert.Equal(t, tc.class, classOf(m), m.ErrorMessage)
		})
	}
}

// A chunked body cut off between chunks is an unexpected EOF, which the
// session retries.
func TestChunkedBodyCut(t *testing.T) {
	a := loopbackAgent(t, func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		part := wholeStream[:40]
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		_, _ = buf.WriteString(strconv.FormatInt(int64(len(part)), 16) + "\r\n" + part + "\r\n")
		_ = buf.Flush()
	}, &http.Transport{})
	m := runOnce(t, a)
	assert.Equal(t, transcript.StopReasonError, m.StopReason)
	assert.Equal(t, "retryable", classOf(m), m.ErrorMessage)
}

// The overflow phrasings of the classifier's corpus, sent as the message
// of a 400, of an error object in place of the stream and of an error
// chunk mid-stream, reach the classifier as the overflow they are.
func TestCorpusOverflowThroughTheAdapter(t *testing.T) {
	f, err := os.Open("../../classify/testdata/errors.tsv")
	require.NoError(t, err)
	defer f.Close()
	var phrasings []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) < 3 || fields[0] != "overflow" {
			continue
		}
		text := strings.ReplaceAll(fields[2], `\n`, "\n")
		plain := classify.Extended.Classify(classify.Message{StopReason: transcript.StopReasonError, ErrorMessage: text, ContextWindow: 128000}, time.Now())
		if plain.Class != classify.Overflow {
			continue // the classifier's own miss, not the adapter's
		}
		phrasings = append(phrasings, text)
	}
	require.NoError(t, sc.Err())
	require.Greater(t, len(phrasings), 40)
	for _, text := range phrasings {
		quoted, err := json.Marshal(text)
		require.NoError(t, err)
		body := `{"error":{"message":` + string(quoted) + `,"type":"invalid_request_error","param":null,"code":null}}`
		for how, handler := range map[string]http.HandlerFunc{
			"400": func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				_, _ = w.Write([]byte(body))
			},
			"200 JSON": func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(body))
			},
			"error chunk": func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\ndata: " + body + "\n\n"))
			},
		} {
			synctest.Test(t, func(t *testing.T) {
				m := rawRun(t, context.Background(), openai.Options{}, handler)
				assert.Equal(t, "overflow", classOf(m), "%s: %q → %q", how, text, m.ErrorMessage)
			})
		}
	}
	t.Logf("%d overflow phrasings, three ways each", len(phrasings))
}

// Tool-call fragments as servers send them: OpenAI's, out of order (index
// 1 before 0, the id after the arguments, a name and arguments cut inside
// a key, an escape and a multi-byte character, the id repeated on each
// fragment); and a compatible server's that sends each call whole at
// index 0 (or with no index), each with its own id: two calls, not one
// call of both arguments run together (before, {"_raw": …} of the two).
func TestToolCallFragments(t *testing.T) {
	chunk := func(calls string) string {
		return "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[" + calls + "]},\"finish_reason\":null}]}\n\n"
	}
	finish := "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
	for name, tc := range map[string]struct {
		stream string
		want   []transcript.Block
	}{
		"out of order": {
			chunk(`{"index":1,"function":{"name":"li","arguments":"{\"pa"}}`) +
				chunk(`{"index":0,"id":"call_a","function":{"name":"read","arguments":""}}`) +
				chunk(`{"index":1,"function":{"name":"st","arguments":"th\":\"a\\\\"}}`) +
				chunk(`{"index":0,"id":"call_a","function":{"arguments":"{\"p\":\"\u00e9"}}`) +
				chunk(`{"index":1,"id":"call_b","function":{"arguments":"\\\"b\"}"}}`) +
				chunk(`{"index":0,"id":"call_a","function":{"arguments":"t\"}"}}`) + finish,
			[]transcript.Block{
				{Type: transcript.BlockToolCall, ID: "call_b", Name: "list", Arguments: json.RawMessage(`{"path":"a\\\"b"}`)},
				{Type: transcript.BlockToolCall, ID: "call_a", Name: "read", Arguments: json.RawMessage(`{"p":"ét"}`)},
			}},
		"each call at index 0": {
			chunk(`{"index":0,"id":"call_a","type":"function","function":{"name":"read","arguments":"{\"p\":1}"}}`) +
				chunk(`{"index":0,"id":"call_b","type":"function","function":{"name":"list","arguments":"{\"p\":2}"}}`) + finish,
			[]transcript.Block{
				{Type: transcript.BlockToolCall, ID: "call_a", Name: "read", Arguments: json.RawMessage(`{"p":1}`)},
				{Type: transcript.BlockToolCall, ID: "call_b", Name: "list", Arguments: json.RawMessage(`{"p":2}`)},
			}},
		"no index": {
			chunk(`{"id":"call_a","type":"function","function":{"name":"read","arguments":"{}"}},{"id":"call_b","type":"function","function":{"name":"list","arguments":"{}"}}`) + finish,
			[]transcript.Block{
				{Type: transcript.BlockToolCall, ID: "call_a", Name: "read", Arguments: json.RawMessage(`{}`)},
				{Type: transcript.BlockToolCall, ID: "call_b", Name: "list", Arguments: json.RawMessage(`{}`)},
			}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var evs []events.Event
				a := openai.New(openai.Options{Model: "gpt-4o", BaseURL: "http://openai.test/v1/", Secrets: credentials.EnvSecrets{Lookup: lookup}, MaxToolRounds: 1,
					HTTPClient: providertest.Client(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						_, _ = w.Write([]byte(tc.stream))
					}))})
				require.NoError(t, a.Run(context.Background(), session.RunRequest{Context: []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hi")}}},
					func(ev events.Event) { evs = append(evs, ev) }))
				first := evs[len(evs)-1].(events.AgentEnd).Messages[0]
				assert.Equal(t, transcript.StopReasonToolUse, first.StopReason, first.ErrorMessage)
				assert.Equal(t, tc.want, first.Content)
			})
		})
	}
}

// A server that trickles one byte a second of an event that never ends,
// or sends only comments (": keep-alive") or events of another kind, gives
// the call no chunk: it ends at Options.IdleTimeout as the transient idle
// failure, not at the event's 8 MiB bound nor never.
func TestTrickleEndsAtTheIdleTimeout(t *testing.T) {
	for name, piece := range map[string]string{"a byte a second": "x", "comments": ": keep-alive\n\n", "pings": "event: ping\ndata: {}\n\n"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				finished := make(chan struct{})
				handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					defer close(finished)
					w.Header().Set("Content-Type", "text/event-stream")
					if piece == "x" {
						_, _ = w.Write([]byte("data: "))
					}
					for r.Context().Err() == nil {
						if _, err := w.Write([]byte(piece)); err != nil {
							return
						}
						w.(http.Flusher).Flush()
						time.Sleep(time.Second)
					}
				})
				start := time.Now()
				m := runOnce(t, openai.New(openai.Options{Model: "gpt-4o", BaseURL: "http://openai.test/v1/", HTTPClient: providertest.Client(handler),
					Secrets: credentials.EnvSecrets{Lookup: lookup}, IdleTimeout: 30 * time.Second}))
				assert.Equal(t, 30*time.Second, time.Since(start))
				assert.Equal(t, "openai: timed out: no data from the server for 30s (Options.IdleTimeout)", m.ErrorMessage)
				assert.Equal(t, "retryable", classOf(m))
				// Where the Go error is lost (a Temporal activity's result,
				// a history), the text says it: before, the text alone was
				// fatal.
				m.Err = nil
				assert.Equal(t, "retryable", classOf(m))
				<-finished // its next write fails: the body was closed
			})
		})
	}
}

// A call cancelled while the server holds back its headers, over a real
// connection, returns at once as aborted, the request cancelled on the
// server's side and no goroutine left (TestMain's goleak).
func TestCancelDuringHeaders(t *testing.T) {
	entered, gone := make(chan struct{}), make(chan struct{})
	a := loopbackAgent(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server sees a close only past the body
		close(entered)
		<-r.Context().Done()
		close(gone)
	}, &http.Transport{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel()
	}()
	var evs []events.Event
	require.NoError(t, a.Run(ctx, session.RunRequest{Context: []transcript.Message{{Role: transcript.RoleUser, Content: transcript.TextContent("hi")}}},
		func(ev events.Event) { evs = append(evs, ev) }))
	<-gone
	end := evs[len(evs)-1].(events.AgentEnd).Messages[0]
	assert.Equal(t, transcript.StopReasonAborted, end.StopReason)
	assert.Equal(t, "Request was aborted", end.ErrorMessage)
}

// The model an agent gives the session holds its base URL with any
// password masked: the session keeps it in its state, snapshots and RPC
// answers (before, the password went along).
func TestModelMasksTheBaseURLPassword(t *testing.T) {
	a := openai.New(openai.Options{BaseURL: "http://user:s3cret-pass@localhost:11434/v1/"})
	assert.Equal(t, "http://user:xxxxx@localhost:11434/v1/", a.Model().BaseURL)
	assert.Equal(t, "http://localhost:11434/v1/", openai.New(openai.Options{BaseURL: "http://localhost:11434/v1/"}).Model().BaseURL)
	assert.Empty(t, openai.New(openai.Options{}).Model().BaseURL)
}

// A 503 with retry-after (or retry-after-ms), and a 200 error object or
// an error chunk whose response carried one, wait the hint, as a 429's
// does.
func TestRetryAfterOnOverload(t *testing.T) {
	overloaded := `{"error":{"message":"That model is currently overloaded with other requests.","type":"server_error","param":null,"code":null}}`
	for name, tc := range map[string]struct {
		status            int
		contentType, body string
		header, value     string
		want              time.Duration
	}{
		"503 retry-after":         {503, "application/json", overloaded, "Retry-After", "7", 7 * time.Second},
		"503 retry-after-ms":      {503, "text/plain", "upstream unavailable", "Retry-After-Ms", "2500", 2500 * time.Millisecond},
		"200 error object":        {200, "application/json", overloaded, "Retry-After", "9", 9 * time.Second},
		"error chunk after a 200": {200, "text/event-stream", "data: " + overloaded + "\n\n", "Retry-After", "4", 4 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				a := openai.New(openai.Options{Model: "gpt-4o", BaseURL: "http://openai.test/v1/", Secrets: credentials.EnvSecrets{Lookup: lookup},
					HTTPClient: providertest.Client(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						calls++
						if calls > 1 {
							_, _ = w.Write([]byte(wholeStream))
							return
						}
						w.Header().Set("Content-Type", tc.contentType)
						w.Header().Set(tc.header, tc.value)
						w.WriteHeader(tc.status)
						_, _ = w.Write([]byte(tc.body))
					}))})
				cfg := policy.DefaultConfig()
				cfg.Retry.BaseDelayMs = 1
				cfg.Retry.HonorRetryAfter = true
				s, err := session.New(a, session.WithModel(a.Model()), session.WithConfig(cfg))
				require.NoError(t, err)
				defer s.Close()
				start := time.Now()
				require.NoError(t, s.Prompt(t.Context(), "hi"))
				assert.Equal(t, tc.want, time.Since(start))
				assert.Equal(t, transcript.TextContent("ok"), lastAssistant(t, s).Content)
			})
		})
	}
}
