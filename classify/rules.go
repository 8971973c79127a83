package classify

// Group names a list of patterns with one role in classification.
type Group string

// The pattern groups. Every pattern belongs to exactly one.
const (
	// GroupOverflow: context-overflow texts (docs/policy.md §2.3). Shared by both
	// rule sets.
	GroupOverflow Group = "overflow"
	// GroupNotOverflow: texts that are throttles even when they also read like
	// an overflow ("Too many tokens, please wait"). Shared by both rule sets.
	GroupNotOverflow Group = "not-overflow"
	// GroupSeedRetry: the reference's retry pattern set (§2.1), exactly.
	GroupSeedRetry Group = "seed-retry"
	// GroupUsageFlag: the seed's usage-limit sub-rule (§2.2): a retryable
	// error that matches takes the usage-limit branch.
	GroupUsageFlag Group = "usage-flag"
	// GroupExtendedRetry: the extended set's retry patterns (§2.6).
	GroupExtendedRetry Group = "extended-retry"
	// GroupExtendedUsage: the extended set's quota and billing patterns,
	// class usage_limit (§2.6).
	GroupExtendedUsage Group = "extended-usage"
)

// Pattern is one classification rule: a regular expression in the syntax
// of the reference's JavaScript rules (case-insensitive, unanchored unless
// it starts with ^) and where it comes from.
type Pattern struct {
	Group Group
	// Expr is the expression as written in the policy.
	Expr string
	// Source names the provider or runtime whose wording the pattern
	// matches, and why it is there.
	Source string
}

var patterns = []Pattern{
	// §2.3: context overflow, in the reference's order.
	{GroupOverflow, `prompt is too long`, "Anthropic"},
	{GroupOverflow, `input is too long for requested model`, "Amazon Bedrock"},
	{GroupOverflow, `exceeds the context window`, "OpenAI (Completions and Responses)"},
	{GroupOverflow, `input token count.*exceeds the maximum`, "Google Gemini"},
	{GroupOverflow, `maximum prompt length is \d+`, "xAI Grok"},
	{GroupOverflow, `reduce the length of the messages`, "Groq"},
	{GroupOverflow, `maximum context length is \d+ tokens`, "OpenAI, OpenRouter"},
	{GroupOverflow, `exceeds the limit of \d+`, "GitHub Copilot"},
	{GroupOverflow, `exceeds the available context size`, "llama.cpp server"},
	{GroupOverflow, `requested tokens?.*exceed.*context (window|length|size)`, "OpenAI-compatible servers"},
	{GroupOverflow, `context (window|length|size).*(exceeded|overflow|too small)`, "generic"},
	{GroupOverflow, `(prompt|input).*(too long|too large).*(context|n_ctx)`, "llama.cpp, Ollama"},
	{GroupOverflow, `requested tokens?.*(exceeds?|greater than).*(n_ctx|context)`, "llama.cpp"},
	{GroupOverflow, `greater than the context length`, "LM Studio"},
	{GroupOverflow, `context window exceeds limit`, "MiniMax"},
	{GroupOverflow, `exceeded model token limit`, "Kimi"},
	{GroupOverflow, `too large for model with \d+ maximum context length`, "Mistral"},
	{GroupOverflow, `model_context_window_exceeded`, "z.ai"},
	{GroupOverflow, `context[_ ]length[_ ]exceeded`, "generic (OpenAI's error code)"},
	{GroupOverflow, `too many tokens`, "generic"},
	{GroupOverflow, `token limit exceeded`, "generic"},
	{GroupOverflow, `request_too_large`, "Anthropic (HTTP 413)"},
	{GroupOverflow, `^4(00|13)\s*(status code)?\s*\(no body\)`, "any provider: a bodyless 400 or 413"},

	// §2.3's exception: throttles are not overflows.
	{GroupNotOverflow, `^(Throttling error|Service unavailable):`, "Amazon Bedrock throttling and service errors"},
	{GroupNotOverflow, `rate limit`, "any provider"},
	{GroupNotOverflow, `too many requests`, "any provider"},
	{GroupNotOverflow, `throttl`, "Amazon Bedrock under other SDKs' prefixes (ThrottlingException, throttlingException)"},
	{GroupNotOverflow, `please wait`, "Amazon Bedrock's throttle text (\"Too many tokens, please wait before trying again\") under any prefix"},

	// §2.1: the reference's retry pattern set, flaws included.
	{GroupSeedRetry, `overloaded`, "Anthropic, Google"},
	{GroupSeedRetry, `rate.?limit`, "any provider"},
	{GroupSeedRetry, `usage.?limit`, "Anthropic, OpenAI Codex"},
	{GroupSeedRetry, `too many requests`, "any provider (HTTP 429)"},
	{GroupSeedRetry, `429|500|502|503|504`, "HTTP statuses, as bare digits anywhere (also inside 1500)"},
	{GroupSeedRetry, `service.?unavailable`, "HTTP 503"},
	{GroupSeedRetry, `server error`, "HTTP 5xx (a literal space: server_error does not match)"},
	{GroupSeedRetry, `internal error`, "HTTP 500 (a literal space)"},
	{GroupSeedRetry, `connection.?error`, "Anthropic and OpenAI SDKs"},
	{GroupSeedRetry, `fetch failed`, "Node.js fetch (undici)"},
	{GroupSeedRetry, `retry delay`, "a server-requested delay above the provider's cap"},

	// §2.2: the usage-limit branch.
	{GroupUsageFlag, `usage.?limit|usage_limit_reached|limit_reached`, "Anthropic, OpenAI Codex"},

	// §2.6: the extended retry set. Everything of §2.1 except the bare
	// digits, which become whole numbers.
	{GroupExtendedRetry, `overloaded`, "Anthropic, Google"},
	{GroupExtendedRetry, `rate.?limit`, "any provider"},
	{GroupExtendedRetry, `too many requests`, "any provider (HTTP 429)"},
	{GroupExtendedRetry, `\b(429|500|502|503|504|52[0-4]|529)\b`, "HTTP statuses as whole numbers: 429, 5xx, Cloudflare's 520-524, Anthropic's 529"},
	{GroupExtendedRetry, `service.?unavailable`, "HTTP 503"},
	{GroupExtendedRetry, `server.?error`, "HTTP 5xx (also OpenAI's server_error)"},
	{GroupExtendedRetry, `internal.?error`, "HTTP 500 (also internal_error)"},
	{GroupExtendedRetry, `connection.?error`, "Anthropic and OpenAI SDKs"},
	{GroupExtendedRetry, `connection.?(refused|reset|lost|closed)`, "sockets"},
	{GroupExtendedRetry, `connection was closed|closed unexpectedly`, "Bun's fetch (\"The socket connection was closed unexpectedly\")"},
	{GroupExtendedRetry, `actively refused`, "Windows sockets (WSAECONNREFUSED)"},
	{GroupExtendedRetry, `ECONNRESET|ECONNREFUSED|ETIMEDOUT|ECONNABORTED|EPIPE|EAI_AGAIN`, "Node.js socket error codes"},
	{GroupExtendedRetry, `socket hang up`, "Node.js http"},
	{GroupExtendedRetry, `other side closed`, "Node.js fetch (undici)"},
	{GroupExtendedRetry, `fetch failed`, "Node.js fetch (undici)"},
	{GroupExtendedRetry, `upstream.?connect`, "Envoy proxies (Anthropic, vLLM deployments)"},
	{GroupExtendedRetry, `reset before headers`, "Envoy proxies"},
	{GroupExtendedRetry, `terminated`, "Node.js fetch (undici: a body stream cut off)"},
	{GroupExtendedRetry, `timed? ?out`, "any transport: time out, timed out, timeout"},
	{GroupExtendedRetry, `network.?error`, "browsers and SDKs"},
	{GroupExtendedRetry, `stream (disconnected|ended)`, "OpenAI Codex and streaming SDKs"},
	{GroupExtendedRetry, `bad gateway`, "HTTP 502"},
	{GroupExtendedRetry, `gateway time-?out`, "HTTP 504"},
	{GroupExtendedRetry, `throttl`, "Amazon Bedrock (ThrottlingException)"},
	{GroupExtendedRetry, `resource.?exhausted`, "Google (gRPC RESOURCE_EXHAUSTED, HTTP 429)"},
	{GroupExtendedRetry, `temporarily (unavailable|out of capacity)`, "Google Vertex AI, HTTP 503"},
	{GroupExtendedRetry, `retry delay`, "a server-requested delay above the provider's cap"},

	// §2.6: quota and billing exhaustion, class usage_limit.
	{GroupExtendedUsage, `usage.?limit|usage_limit_reached|limit_reached`, "Anthropic, OpenAI Codex (as §2.2)"},
	{GroupExtendedUsage, `insufficient_quota`, "OpenAI"},
	{GroupExtendedUsage, `exceeded your current quota`, "OpenAI, Google Gemini"},
	{GroupExtendedUsage, `credit balance is too low`, "Anthropic"},
	{GroupExtendedUsage, `more credits|can only afford`, "OpenRouter (HTTP 402)"},
	{GroupExtendedUsage, `quota.*(per day|per month|daily|monthly)|(daily|monthly) (quota|limit)`, "Google: a quota for a day or a month, not a minute"},
	{GroupExtendedUsage, `quota (reached|exhausted)`, "Google Gemini CLI"},
	{GroupExtendedUsage, `quota.*limit: 0\b`, "Google: a quota whose limit is 0 on this plan"},
	{GroupExtendedUsage, `resets_at|limit will reset|resets (in|at) `, "Anthropic, OpenAI Codex, Google: a limit with a reset time"},
	{GroupExtendedUsage, `upgrade (to (plus|pro|a paid plan)|your (plan|subscription))`, "OpenAI ChatGPT plans, Google: a plan's limit"},
}

// Patterns returns every pattern in classification order, grouped. The
// result is a copy.
func Patterns() []Pattern {
	out := make([]Pattern, len(patterns))
	copy(out, patterns)
	return out
}

// The scanners, one per rule set. Bit i of a scan is the i-th group.
var (
	seedScanner     = compileScanner([]Group{GroupOverflow, GroupNotOverflow, GroupSeedRetry, GroupUsageFlag})
	extendedScanner = compileScanner([]Group{GroupOverflow, GroupNotOverflow, GroupExtendedRetry, GroupExtendedUsage})
)

const (
	bitOverflow groupBits = 1 << iota
	bitNotOverflow
	bitRetry
	bitUsage
)
