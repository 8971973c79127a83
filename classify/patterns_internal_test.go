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

	`usage.?limit|(daily|weekly|monthly|spend)_limit_reached`: {"enforced_spend_limit_reached", "rate_limit_reached_error"},

	// The extended rules' further patterns: a positive example for each
	// alternative in moreExamples, written from the provider's wording, not
	// copied from a corpus row.
	`· resets\b|∙ resets\b`:                                                                  {"Session limit reached · resets 3pm", "the limit resets every minute"},
	`exceed your account's rate limit`:                                                       {"This request would exceed your account's rate limit.", "would exceed the rate limit for your organization"},
	`out of credits|insufficient credits|(any|enough) credits|credit limit`:                  {"You have run out of credits", "credits: 12.50 remaining"},
	`billing hard limit|billing details|billing_not_active`:                                  {"Billing hard limit has been reached", "billing account linked"},
	`insufficient[_ ]balance|balance is insufficient`:                                        {"402 Insufficient Balance", "balance: sufficient"},
	`account is in good standing|arrearage`:                                                  {"code: Arrearage", "your account is in use"},
	`quota will (reset|be refreshed)|(limit|quota|credits) (to reset|reset on)`:              {"Your quota will reset after 2h", "the quota resets"},
	`(calls|requests|tokens) ?(/|per) ?(day|month)\b|perday`:                                 {"on tokens per day (TPD): Limit 500000", "on tokens per minute (TPM)"},
	`monthly[_ ](request|credit|chat|spend)|weekly[_ ](rate[_ ])?limit|premium request`:      {"You've reached your monthly chat messages quota", "monthly report"},
	`you have no quota|\bquota_exceeded\b|quota is not enough|free (allocated |tier )?quota`: {"You have no quota", "request_quota_exceeded"},
	`key limit exceeded|budget (has been )?exceeded|exceeded (your )?budget|budget_exceeded`: {"Key limit exceeded", "token budget: 2048"},
	`(requires|need) a (grok )?subscription|limite de uso`:                                   {"this model requires a subscription", "subscription active"},
	`余额不足|欠费|使用上限`:                                                                           {"余额不足或无可用资源包", "请求频率过高"},

	`exceed context limit`:                       {"input length and max_tokens exceed context limit: 190000 + 32000 > 200000", "exceed rate limit"},
	`prompt tokens \(\d+\) exceed model maximum`: {"prompt tokens (300001) exceed model maximum (278528)", "prompt tokens exceed model maximum"},
	`expected maxLength: \d+, actual: \d+`:       {"Malformed input request: expected maxLength: 50000, actual: 61000", "expected maxLength: 8191"},
	`exceeds? (the )?(model's )?max(imum)? context length|(prompt|input)( length \d+)? exceeds (the )?max(imum)? length`:   {"Prompt exceeds max length", "function name exceeds the maximum length"},
	`input prompt \(\d+ tokens\) is too long|must be less than max_seq_len`:                                                {"Input prompt (9000 tokens) is too long and exceeds limit of 8192", "input prompt is too long"},
	`ran out of room in the model's context window|incomplete response returned, reason: max_output_tokens`:                {"Codex ran out of room in the model's context window.", "reason: content_filter"},
	`maximum request body size \d+ exceeded|payload size exceeds the limit`:                                                {"Maximum request body size 1048576 exceeded", "request body size ok"},
	`(messages|input)\[\d+\]\.content'?: string too long`:                                                                  {"Invalid 'messages[3].content': string too long.", "Invalid 'tools[0].function.name': string too long."},
	`max_tokens must be at least 1, got -\d+`:                                                                              {"max_tokens must be at least 1, got -12.", "max_tokens must be at least 1, got 0."},
	"`inputs` (tokens \\+ `max_new_tokens` must be <=|must have less than) \\d+":                                           {"`inputs` must have less than 4096 tokens. Given: 5000", "`max_new_tokens` must be <= 4096"},
	`range of input length should be \[1, \d+\]`:                                                                           {"Range of input length should be [1, 30720]", "Range of max_tokens should be [1, 8192]"},
	`(message|prompt|input) exceeds (the )?token limit|model_max_prompt_tokens_exceeded`:                                   {"Error: Message exceeds token limit.", "exceeds the rate limit"},
	`model is loaded with context length of only \d+`:                                                                      {"the model is loaded with context length of only 4096 tokens", "the model is loaded"},
	`larger than the max context size|input is too large to process|too big compared to kv size|exceed_context_size_error`: {"input is larger than the max context size. skipping", "the batch is larger than usual"},
	`prompt_limit`: {`{"type":"prompt_limit"}`, "prompt limit"},

	`too large for .* on tokens per min`:   {"Request too large for gpt-4o in organization org-1 on tokens per min (TPM): Limit 30000, Requested 31000.", "Rate limit reached for gpt-4o on tokens per min"},
	`limit \d+, used \d+, requested ~?\d+`: {"Limit 6000, Used 0, Requested ~9000", "Limit 6000, Requested 9000"},
	`tool_use_id|tool_result`:              {"unexpected `tool_use_id` found", "tool use failed"},
	`tool_call_id|no tool (call|output) found|must be a response to a preceeding message`: {"No tool output found for function call call_1.", "tool call succeeded"},
	`function (call|response) turn comes immediately after|after role .tool.`:             {"Unexpected role 'user' after role 'tool'", "after the tool ran"},
	`requires more system memory`: {"model requires more system memory (8.0 GiB) than is available (4.0 GiB)", "requires more time"},
	`model access is denied|not authorized to perform|access_terminated_error`:              {"User is not authorized to perform: bedrock:InvokeModel", "authorized"},
	`please wait before trying again|retry shortly`:                                         {"Too many requests, please wait before trying again.", "please wait a moment while we set up"},
	`capacity[_ ]exceeded|at capacity|no capacity available|high demand|high traffic`:       {"The model is at capacity.", "capacity: 8 GPUs"},
	`(server|llm) (is )?busy|no slots available`:                                            {"The server is busy. Please try again later.", "busy loop"},
	`unable to process your request`:                                                        {"Bedrock is unable to process your request.", "unable to parse your request"},
	`peer closed connection|incomplete chunked read|": eof\b|unexpected eof|bad record mac`: {`Post "http://127.0.0.1:11434/api/chat": EOF`, "EOFError in the tokenizer"},
	`not connected to the internet|check your (network|internet) connection`:                {"Please check your internet connection.", "connected to the internet"},
	`tool_use_failed`: {`"code":"tool_use_failed"`, "tool use failed"},
	`enginedeaderror|model is down\b|no deployments available`: {"vllm.v1.engine.exceptions.EngineDeadError", "the model is downloading"},
}

// moreExamples give the patterns with alternatives a positive example for
// each alternative besides the one above.
var moreExamples = map[string][]string{
	`· resets\b|∙ resets\b`: {"You've hit your weekly limit · resets Mon", "You're out of extra usage ∙ resets 2am"},
	`out of credits|insufficient credits|(any|enough) credits|credit limit`:                                                {"Insufficient credits. Add more", "doesn't have any credits yet", "Credit limit exceeded"},
	`billing hard limit|billing details|billing_not_active`:                                                                {"please check your plan and billing details", `"code": "billing_not_active"`},
	`insufficient[_ ]balance|balance is insufficient`:                                                                      {"insufficient_balance", "Your paid balance is insufficient."},
	`account is in good standing|arrearage`:                                                                                {"Access denied, please make sure your account is in good standing."},
	`quota will (reset|be refreshed)|(limit|quota|credits) (to reset|reset on)`:                                            {"Your quota will be refreshed in the next cycle", "wait for your limit to reset on May 1", "until your credits reset on July 1"},
	`(calls|requests|tokens) ?(/|per) ?(day|month)\b|perday`:                                                               {"limited to 1000 API calls / month", "requests per day (RPD)", "quotaId: GenerateRequestsPerDayPerProjectPerModel"},
	`monthly[_ ](request|credit|chat|spend)|weekly[_ ](rate[_ ])?limit|premium request`:                                    {"MONTHLY_REQUEST_COUNT", "reached its monthly spending limit", "your organization's monthly spend limit", "user_weekly_rate_limited", "Weekly limit reached", "exceeded your premium request limit"},
	`you have no quota|\bquota_exceeded\b|quota is not enough|free (allocated |tier )?quota`:                               {`"code":"quota_exceeded"`, "user quota is not enough", "Free allocated quota exceeded.", "free tier quota exceeded"},
	`key limit exceeded|budget (has been )?exceeded|exceeded (your )?budget|budget_exceeded`:                               {"Budget has been exceeded! Current cost: 2", "User: a, exceeded budget for model=x", `"type": "budget_exceeded"`},
	`(requires|need) a (grok )?subscription|limite de uso`:                                                                 {"You have run out of credits or need a Grok subscription.", "Seu limite de uso será redefinido"},
	`余额不足|欠费|使用上限`:                                                                                                         {"您的账户已欠费，请充值后重试。", "已达到 5 小时的使用上限"},
	`exceeds? (the )?(model's )?max(imum)? context length|(prompt|input)( length \d+)? exceeds (the )?max(imum)? length`:   {"Input length (300000) exceeds model's maximum context length (262144).", "Input length 203743 exceeds the maximum length 202752", "Prompt exceeds maximum context length"},
	`input prompt \(\d+ tokens\) is too long|must be less than max_seq_len`:                                                {"prompt_tokens (40000) must be less than max_seq_len (32768)"},
	`ran out of room in the model's context window|incomplete response returned, reason: max_output_tokens`:                {"Incomplete response returned, reason: max_output_tokens"},
	`maximum request body size \d+ exceeded|payload size exceeds the limit`:                                                {"Request payload size exceeds the limit: 20971520 bytes."},
	`(messages|input)\[\d+\]\.content'?: string too long`:                                                                  {"Invalid 'input[0].content': string too long."},
	"`inputs` (tokens \\+ `max_new_tokens` must be <=|must have less than) \\d+":                                           {"`inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens and 200 `max_new_tokens`"},
	`(message|prompt|input) exceeds (the )?token limit|model_max_prompt_tokens_exceeded`:                                   {"prompt exceeds the token limit", `"code":"model_max_prompt_tokens_exceeded"`},
	`larger than the max context size|input is too large to process|too big compared to kv size|exceed_context_size_error`: {"input is too large to process. increase the physical batch size", "input prompt is too big compared to KV size", `"type":"exceed_context_size_error"`},
	`tool_use_id|tool_result`: {"tool_use ids were found without tool_result blocks"},
	`tool_call_id|no tool (call|output) found|must be a response to a preceeding message`:   {"responding to each 'tool_call_id'", "No tool call found for function call output", "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'"},
	`function (call|response) turn comes immediately after|after role .tool.`:               {"Please ensure that function response turn comes immediately after a function call turn."},
	`model access is denied|not authorized to perform|access_terminated_error`:              {"Model access is denied due to IAM user", `"type":"access_terminated_error"`},
	`please wait before trying again|retry shortly`:                                         {"Please retry shortly."},
	`capacity[_ ]exceeded|at capacity|no capacity available|high demand|high traffic`:       {"Service tier capacity exceeded for this model.", "498 capacity_exceeded", "No capacity available for model x", "experiencing high demand", "We're experiencing high traffic right now!"},
	`(server|llm) (is )?busy|no slots available`:                                            {"server busy, please try again", "llm busy - no slots available"},
	`peer closed connection|incomplete chunked read|": eof\b|unexpected eof|bad record mac`: {"peer closed connection without sending complete message body", "(incomplete chunked read)", "unexpected EOF", "ssl/tls alert bad record mac"},
	`not connected to the internet|check your (network|internet) connection`:                {"It appears you're not connected to the internet"},
	`enginedeaderror|model is down\b|no deployments available`:                              {"Your chosen model is down", "No deployments available for selected model"},
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
		for _, pos := range append([]string{ex[0]}, moreExamples[p.Expr]...) {
			if !match(pos) {
				t.Errorf("pattern %q does not match its positive example %q", p.Expr, pos)
			}
		}
		if match(ex[1]) {
			t.Errorf("pattern %q matches its negative example %q", p.Expr, ex[1])
		}
	}
}

// Characters outside ASCII without case (CJK) are literals; those with
// case are refused (TestTranslateRejectsUnsupportedSyntax), since
// JavaScript's case folding of them differs from Go's.
func TestTranslateTakesCaselessCharacters(t *testing.T) {
	res := jsRegexps(`余额不足|ab欠费`)
	match := func(text string) bool {
		for _, re := range res {
			if re.Match(lowerText(text)) {
				return true
			}
		}
		return false
	}
	if !match("429 余额不足或无可用资源包") || !match("AB欠费") || match("余额") {
		t.Error("caseless characters do not match as literals")
	}
}

func TestTranslateRejectsUnsupportedSyntax(t *testing.T) {
	for _, src := range []string{`a\w`, `a{2}`, `[a-z]`, `é`, "a\xff", `(a`, `a\`} {
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
