package classify

// group names a list of patterns with one role in classification.
type group string

// The pattern groups. Every pattern belongs to exactly one.
const (
	// groupOverflow: context-overflow texts (docs/policy.md §2.3). Shared by both
	// rule sets.
	groupOverflow group = "overflow"
	// groupNotOverflow: texts that are throttles even when they also read like
	// an overflow ("Too many tokens, please wait"). Shared by both rule sets.
	groupNotOverflow group = "not-overflow"
	// groupSeedRetry: the reference's retry pattern set (§2.1), exactly.
	groupSeedRetry group = "seed-retry"
	// groupUsageFlag: the seed's usage-limit sub-rule (§2.2): a retryable
	// error that matches takes the usage-limit branch.
	groupUsageFlag group = "usage-flag"
	// groupExtendedRetry: the extended set's retry patterns (§2.6).
	groupExtendedRetry group = "extended-retry"
	// groupExtendedUsage: the extended set's quota and billing patterns,
	// class usage_limit (§2.6).
	groupExtendedUsage group = "extended-usage"
)

// pattern is one classification rule: a regular expression in the syntax
// of the reference's JavaScript rules (case-insensitive, unanchored unless
// it starts with ^) and where it comes from.
type pattern struct {
	Group group
	// Expr is the expression as written in the policy.
	Expr string
	// Source names the provider or runtime whose wording the pattern
	// matches, and why it is there.
	Source string
}

// patterns are every pattern in classification order, grouped.
var patterns = []pattern{
	// §2.3: context overflow, in the reference's order.
	{groupOverflow, `prompt is too long`, "Anthropic"},
	{groupOverflow, `input is too long for requested model`, "Amazon Bedrock"},
	{groupOverflow, `exceeds the context window`, "OpenAI (Completions and Responses)"},
	{groupOverflow, `input token count.*exceeds the maximum`, "Google Gemini"},
	{groupOverflow, `maximum prompt length is \d+`, "xAI Grok"},
	{groupOverflow, `reduce the length of the messages`, "Groq"},
	{groupOverflow, `maximum context length is \d+ tokens`, "OpenAI, OpenRouter"},
	{groupOverflow, `exceeds the limit of \d+`, "GitHub Copilot"},
	{groupOverflow, `exceeds the available context size`, "llama.cpp server"},
	{groupOverflow, `requested tokens?.*exceed.*context (window|length|size)`, "OpenAI-compatible servers"},
	{groupOverflow, `context (window|length|size).*(exceeded|overflow|too small)`, "generic"},
	{groupOverflow, `(prompt|input).*(too long|too large).*(context|n_ctx)`, "llama.cpp, Ollama"},
	{groupOverflow, `requested tokens?.*(exceeds?|greater than).*(n_ctx|context)`, "llama.cpp"},
	{groupOverflow, `greater than the context length`, "LM Studio"},
	{groupOverflow, `context window exceeds limit`, "MiniMax"},
	{groupOverflow, `exceeded model token limit`, "Kimi"},
	{groupOverflow, `too large for model with \d+ maximum context length`, "Mistral"},
	{groupOverflow, `model_context_window_exceeded`, "z.ai"},
	{groupOverflow, `context[_ ]length[_ ]exceeded`, "generic (OpenAI's error code)"},
	{groupOverflow, `too many tokens`, "generic"},
	{groupOverflow, `token limit exceeded`, "generic"},
	{groupOverflow, `request_too_large`, "Anthropic (HTTP 413)"},
	{groupOverflow, `^4(00|13)\s*(status code)?\s*\(no body\)`, "any provider: a bodyless 400 or 413"},

	// §2.3's exception: throttles are not overflows.
	{groupNotOverflow, `^(Throttling error|Service unavailable):`, "Amazon Bedrock throttling and service errors"},
	{groupNotOverflow, `rate limit`, "any provider"},
	{groupNotOverflow, `too many requests`, "any provider"},
	{groupNotOverflow, `throttl`, "Amazon Bedrock under other SDKs' prefixes (ThrottlingException, throttlingException)"},
	{groupNotOverflow, `please wait`, "Amazon Bedrock's throttle text (\"Too many tokens, please wait before trying again\") under any prefix"},

	// §2.1: the reference's retry pattern set, flaws included.
	{groupSeedRetry, `overloaded`, "Anthropic, Google"},
	{groupSeedRetry, `rate.?limit`, "any provider"},
	{groupSeedRetry, `usage.?limit`, "Anthropic, OpenAI Codex"},
	{groupSeedRetry, `too many requests`, "any provider (HTTP 429)"},
	{groupSeedRetry, `429|500|502|503|504`, "HTTP statuses, as bare digits anywhere (also inside 1500)"},
	{groupSeedRetry, `service.?unavailable`, "HTTP 503"},
	{groupSeedRetry, `server error`, "HTTP 5xx (a literal space: server_error does not match)"},
	{groupSeedRetry, `internal error`, "HTTP 500 (a literal space)"},
	{groupSeedRetry, `connection.?error`, "Anthropic and OpenAI SDKs"},
	{groupSeedRetry, `fetch failed`, "Node.js fetch (undici)"},
	{groupSeedRetry, `retry delay`, "a server-requested delay above the provider's cap"},

	// §2.2: the usage-limit branch.
	{groupUsageFlag, `usage.?limit|usage_limit_reached|limit_reached`, "Anthropic, OpenAI Codex"},

	// §2.6: the extended retry set. Everything of §2.1 except the bare
	// digits, which become whole numbers.
	{groupExtendedRetry, `overloaded`, "Anthropic, Google"},
	{groupExtendedRetry, `rate.?limit`, "any provider"},
	{groupExtendedRetry, `too many requests`, "any provider (HTTP 429)"},
	{groupExtendedRetry, `\b(429|500|502|503|504|52[0-4]|529)\b`, "HTTP statuses as whole numbers: 429, 5xx, Cloudflare's 520-524, Anthropic's 529"},
	{groupExtendedRetry, `service.?unavailable`, "HTTP 503"},
	{groupExtendedRetry, `server.?error`, "HTTP 5xx (also OpenAI's server_error)"},
	{groupExtendedRetry, `internal.?error`, "HTTP 500 (also internal_error)"},
	{groupExtendedRetry, `connection.?error`, "Anthropic and OpenAI SDKs"},
	{groupExtendedRetry, `connection.?(refused|reset|lost|closed)`, "sockets"},
	{groupExtendedRetry, `connection was closed|closed unexpectedly`, "Bun's fetch (\"The socket connection was closed unexpectedly\")"},
	{groupExtendedRetry, `actively refused`, "Windows sockets (WSAECONNREFUSED)"},
	{groupExtendedRetry, `ECONNRESET|ECONNREFUSED|ETIMEDOUT|ECONNABORTED|EPIPE|EAI_AGAIN`, "Node.js socket error codes"},
	{groupExtendedRetry, `socket hang up`, "Node.js http"},
	{groupExtendedRetry, `other side closed`, "Node.js fetch (undici)"},
	{groupExtendedRetry, `fetch failed`, "Node.js fetch (undici)"},
	{groupExtendedRetry, `upstream.?connect`, "Envoy proxies (Anthropic, vLLM deployments)"},
	{groupExtendedRetry, `reset before headers`, "Envoy proxies"},
	{groupExtendedRetry, `terminated`, "Node.js fetch (undici: a body stream cut off)"},
	{groupExtendedRetry, `timed? ?out`, "any transport: time out, timed out, timeout"},
	{groupExtendedRetry, `network.?error`, "browsers and SDKs"},
	{groupExtendedRetry, `stream (disconnected|ended)`, "OpenAI Codex and streaming SDKs"},
	{groupExtendedRetry, `bad gateway`, "HTTP 502"},
	{groupExtendedRetry, `gateway time-?out`, "HTTP 504"},
	{groupExtendedRetry, `throttl`, "Amazon Bedrock (ThrottlingException)"},
	{groupExtendedRetry, `resource.?exhausted`, "Google (gRPC RESOURCE_EXHAUSTED, HTTP 429)"},
	{groupExtendedRetry, `temporarily (unavailable|out of capacity)`, "Google Vertex AI, HTTP 503"},
	{groupExtendedRetry, `retry delay`, "a server-requested delay above the provider's cap"},

	// §2.6: quota and billing exhaustion, class usage_limit.
	{groupExtendedUsage, `usage.?limit|usage_limit_reached|limit_reached`, "Anthropic, OpenAI Codex (as §2.2)"},
	{groupExtendedUsage, `insufficient_quota`, "OpenAI"},
	{groupExtendedUsage, `exceeded your current quota`, "OpenAI, Google Gemini"},
	{groupExtendedUsage, `credit balance is too low`, "Anthropic"},
	{groupExtendedUsage, `more credits|can only afford`, "OpenRouter (HTTP 402)"},
	{groupExtendedUsage, `quota.*(per day|per month|daily|monthly)|(daily|monthly) (quota|limit)`, "Google: a quota for a day or a month, not a minute"},
	{groupExtendedUsage, `quota (reached|exhausted)`, "Google Gemini CLI"},
	{groupExtendedUsage, `quota.*limit: 0\b`, "Google: a quota whose limit is 0 on this plan"},
	{groupExtendedUsage, `resets_at|limit will reset|resets (in|at) `, "Anthropic, OpenAI Codex, Google: a limit with a reset time"},
	{groupExtendedUsage, `upgrade (to (plus|pro|a paid plan)|your (plan|subscription))`, "OpenAI ChatGPT plans, Google: a plan's limit"},
}

// The scanners, one per rule set. Bit i of a scan is the i-th group.
var (
	seedScanner     = compileScanner([]group{groupOverflow, groupNotOverflow, groupSeedRetry, groupUsageFlag})
	extendedScanner = compileScanner([]group{groupOverflow, groupNotOverflow, groupExtendedRetry, groupExtendedUsage})
)

const (
	bitOverflow groupBits = 1 << iota
	bitNotOverflow
	bitRetry
	bitUsage
)
