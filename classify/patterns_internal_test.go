package classify

import (
	"testing"
)

// examples gives every pattern a text it matches and one it does not, so
// each rule is pinned on its own. A pattern without an entry fails the test.
var examples = map[string][2]string{
	`prompt is too long`:                                          {"Prompt is too long: 5 tokens", "prompt too long"},
	`input is too long for requested model`:                       {"INPUT is too long for requested model.", "input is too long"},
	`exceeds the context window`:                                  {"your input exceeds the context window", "exceeds the window"},
	`input token count.*exceeds the maximum`:                      {"input token count (9) exceeds the maximum", "input token count\nexceeds the maximum"},
	`maximum prompt length is \d+`:                                {"maximum prompt length is 131072", "maximum prompt length is large"},
	`reduce the length of the messages`:                           {"Please reduce the length of the messages", "reduce the messages"},
	`maximum context length is \d+ tokens`:                        {"maximum context length is 4097 tokens", "maximum context length is 4097"},
	`exceeds the limit of \d+`:                                    {"exceeds the limit of 128000", "exceeds the limit"},
	`exceeds the available context size`:                          {"the request exceeds the available context size", "exceeds the context size"},
	`requested tokens?.*exceed.*context (window|length|size)`:     {"requested tokens 9 exceed the context size", "requested tokens exceed the window"},
	`context (window|length|size).*(exceeded|overflow|too small)`: {"context window was exceeded", "context exceeded"},
	`(prompt|input).*(too long|too large).*(context|n_ctx)`:       {"input is too large for n_ctx", "input is too large"},
	`requested tokens?.*(exceeds?|greater than).*(n_ctx|context)`: {"requested token count greater than n_ctx", "requested tokens exceed"},
	`greater than the context length`:                             {"is greater than the context length", "greater than the length"},
	`context window exceeds limit`:                                {"context window exceeds limit", "context exceeds limit"},
	`exceeded model token limit`:                                  {"Exceeded model token limit: 5", "exceeded token limit"},
	`too large for model with \d+ maximum context length`:         {"too large for model with 32768 maximum context length", "too large for model"},
	`model_context_window_exceeded`:                               {"MODEL_CONTEXT_WINDOW_EXCEEDED", "model context window exceeded!"},
	`context[_ ]length[_ ]exceeded`:                               {"context_length exceeded", "context-length-exceeded"},
	`too many tokens`:                                             {"Too many tokens", "too many token"},
	`token limit exceeded`:                                        {"token limit exceeded", "token limit reached"},
	`request_too_large`:                                           {"request_too_large", "request too large"},
	`^4(00|13)\s*(status code)?\s*\(no body\)`:                    {"413 status code (no body)", "HTTP 413 (no body)"},

	`^(Throttling error|Service unavailable):`: {"Service unavailable: try later", "Service unavailable"},
	`rate limit`:        {"rate limit hit", "ratelimit"},
	`too many requests`: {"Too Many Requests", "too many"},
	`throttl`:           {"ThrottlingException", "throt"},
	`please wait`:       {"please wait before trying again", "please, wait"},

	`overloaded`:           {"Overloaded", "overload"},
	`rate.?limit`:          {"rate_limit", "rate__limit"},
	`usage.?limit`:         {"usage limit", "usage"},
	`429|500|502|503|504`:  {"x5030", "501"},
	`service.?unavailable`: {"service_unavailable", "service unavail"},
	`server error`:         {"Internal Server Error", "server_error"},
	`internal error`:       {"internal error", "internal_error"},
	`connection.?error`:    {"Connection error.", "connection failed"},
	`fetch failed`:         {"TypeError: fetch failed", "fetch was failed"},
	`retry delay`:          {"90s retry delay", "retry-delay"},
	`usage.?limit|usage_limit_reached|limit_reached`: {"daily_limit_reached", "limit reached"},

	`\b(429|500|502|503|504|52[0-4]|529)\b`:                          {"HTTP 529", "1500"},
	`server.?error`:                                                  {"server_error", "server failure"},
	`internal.?error`:                                                {"internal_error", "internal failure"},
	`connection.?(refused|reset|lost|closed)`:                        {"connection_lost", "connection ok"},
	`connection was closed|closed unexpectedly`:                      {"the socket closed unexpectedly", "closed as expected"},
	`actively refused`:                                               {"the target machine actively refused it", "refused"},
	`ECONNRESET|ECONNREFUSED|ETIMEDOUT|ECONNABORTED|EPIPE|EAI_AGAIN`: {"getaddrinfo EAI_AGAIN", "ECONN"},
	`socket hang up`:                                                 {"Error: socket hang up", "socket hung up"},
	`other side closed`:                                              {"other side closed", "other side open"},
	`upstream.?connect`:                                              {"upstream connect error", "upstream failed"},
	`reset before headers`:                                           {"disconnect/reset before headers", "reset after headers"},
	`terminated`:                                                     {"TypeError: terminated", "terminate"},
	`timed? ?out`:                                                    {"request timed out", "time-out"},
	`network.?error`:                                                 {"NetworkError", "network failure"},
	`stream (disconnected|ended)`:                                    {"stream disconnected before completion", "stream closed"},
	`bad gateway`:                                                    {"502 Bad Gateway", "bad gate"},
	`gateway time-?out`:                                              {"Gateway Time-out", "gateway slow"},
	`resource.?exhausted`:                                            {"RESOURCE_EXHAUSTED", "resources exhausted"},
	`temporarily (unavailable|out of capacity)`:                      {"temporarily out of capacity", "temporarily down"},
	`insufficient_quota`:                                             {"insufficient_quota", "insufficient quota"},
	`exceeded your current quota`:                                    {"You exceeded your current quota", "exceeded your quota"},
	`credit balance is too low`:                                      {"Your credit balance is too low", "credit balance is low"},
	`more credits|can only afford`:                                   {"More credits are required", "credits"},
	`quota.*(per day|per month|daily|monthly)|(daily|monthly) (quota|limit)`: {"quota 'requests per day'", "quota per minute"},
	`quota (reached|exhausted)`:                                    {"Individual quota reached", "quota exceeded"},
	`quota.*limit: 0\b`:                                            {"Quota exceeded ... limit: 0.", "quota exceeded, limit: 05"},
	`resets_at|limit will reset|resets (in|at) `:                   {"Resets in 9h22m20s", "resets"},
	`upgrade (to (plus|pro|a paid plan)|your (plan|subscription))`: {"upgrade to Plus", "upgrade later"},
}

func TestEveryPatternHasExamples(t *testing.T) {
	for _, p := range patterns {
		ex, ok := examples[p.Expr]
		if !ok {
			t.Errorf("pattern %q (%s) has no examples", p.Expr, p.Group)
			continue
		}
		res := jsRegexps(p.Expr)
		match := func(text string) bool {
			for _, re := range res {
				if re.Match(lowerText(text)) {
					return true
				}
			}
			return false
		}
		if !match(ex[0]) {
			t.Errorf("pattern %q does not match its positive example %q", p.Expr, ex[0])
		}
		if match(ex[1]) {
			t.Errorf("pattern %q matches its negative example %q", p.Expr, ex[1])
		}
	}
}

func TestTranslateRejectsUnsupportedSyntax(t *testing.T) {
	for _, src := range []string{`a\w`, `a{2}`, `[a-z]`, `é`, `(a`, `a\`} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%q: no panic", src)
				}
			}()
			jsRegexps(src)
		}()
	}
}
