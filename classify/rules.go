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
	// groupExtendedOverflow: overflow wordings the extended set recognises
	// besides the shared ones: its overflows are a superset of the seed's.
	groupExtendedOverflow group = "extended-overflow"
	// groupExtendedFatal: errors that read like transient ones but that no
	// retry fixes (a request larger than a per-minute budget, tool calls
	// that do not pair up): under the extended set they are fatal, whatever
	// retry wording or transient status comes with them.
	groupExtendedFatal group = "extended-fatal"
	// groupExtendedBudget: a rate limit stated as numbers; the extended set
	// calls it fatal when the request alone is above the limit.
	groupExtendedBudget group = "extended-budget"
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
	{groupExtendedRetry, `please wait before trying again|retry shortly`, "Amazon Bedrock's throttle text; OpenRouter and gateways: \"Please retry shortly\""},
	{groupExtendedRetry, `capacity[_ ]exceeded|at capacity|no capacity available|high demand|high traffic`, "Mistral, Groq (498), OpenAI Codex, Google, GitHub Copilot, Cerebras: out of capacity for now"},
	{groupExtendedRetry, `(server|llm) (is )?busy|no slots available`, "DeepSeek, Ollama, llama.cpp: the server is busy"},
	{groupExtendedRetry, `unable to process your request`, "Amazon Bedrock (ServiceUnavailableException)"},
	{groupExtendedRetry, `peer closed connection|incomplete chunked read|": eof\b|unexpected eof|bad record mac`, "httpx (Python SDKs), Go's net/http, OpenSSL: the connection broke mid-response"},
	{groupExtendedRetry, `not connected to the internet|check your (network|internet) connection`, "GitHub Copilot, browsers: the network is down"},
	{groupExtendedRetry, `tool_use_failed`, "Groq: the model produced a malformed tool call; another sample may not"},
	{groupExtendedRetry, `enginedeaderror|model is down\b|no deployments available`, "vLLM (the engine died; the server restarts it), OpenRouter (HTTP 502), LiteLLM's router"},

	// §2.6: quota and billing exhaustion, class usage_limit.
	{groupExtendedUsage, `usage.?limit|(daily|weekly|monthly|spend)_limit_reached`, "Anthropic (enforced_spend_limit_reached), OpenAI Codex (as §2.2, without its bare limit_reached, which is also Moonshot's rate_limit_reached_error throttle)"},
	{groupExtendedUsage, `insufficient_quota`, "OpenAI"},
	{groupExtendedUsage, `exceeded your current quota`, "OpenAI, Google Gemini"},
	{groupExtendedUsage, `credit balance is too low`, "Anthropic"},
	{groupExtendedUsage, `more credits|can only afford`, "OpenRouter (HTTP 402)"},
	{groupExtendedUsage, `quota.*(per day|per month|daily|monthly)|(daily|monthly) (quota|limit)`, "Google: a quota for a day or a month, not a minute"},
	{groupExtendedUsage, `quota (reached|exhausted)`, "Google Gemini CLI"},
	{groupExtendedUsage, `quota.*limit: 0\b`, "Google: a quota whose limit is 0 on this plan"},
	{groupExtendedUsage, `resets_at|limit will reset|resets (in|at) `, "Anthropic, OpenAI Codex, Google: a limit with a reset time"},
	{groupExtendedUsage, `upgrade (to (plus|pro|a paid plan)|your (plan|subscription))`, "OpenAI ChatGPT plans, Google: a plan's limit"},
	{groupExtendedUsage, `· resets\b|∙ resets\b`, "Claude plans: \"5-hour limit reached · resets 5am\", \"out of extra usage ∙ resets …\" (the dot between is the wording's)"},
	{groupExtendedUsage, `exceed your account's rate limit`, "Claude plans (Anthropic's API says \"the rate limit for your organization\" for its per-minute limits)"},
	{groupExtendedUsage, `out of credits|insufficient credits|(any|enough) credits|credit limit`, "xAI, OpenRouter, Together, GitHub Copilot: no credits left"},
	{groupExtendedUsage, `billing hard limit|billing details|billing_not_active`, "OpenAI, Moonshot: \"check your plan and billing details\", a billing limit"},
	{groupExtendedUsage, `insufficient[_ ]balance|balance is insufficient`, "DeepSeek (HTTP 402), Moonshot, SiliconFlow, OpenCode"},
	{groupExtendedUsage, `account is in good standing|arrearage`, "Alibaba DashScope: an overdue payment (Arrearage)"},
	{groupExtendedUsage, `quota will (reset|be refreshed)|(limit|quota|credits) (to reset|reset on)`, "Google Gemini, Moonshot, GitHub Copilot: a quota that says when it resets"},
	{groupExtendedUsage, `(calls|requests|tokens) ?(/|per) ?(day|month)\b|perday`, "Groq (TPD), OpenAI (RPD), Amazon Bedrock, Cohere trial keys, OpenRouter, Google quota IDs: a daily or monthly allowance"},
	{groupExtendedUsage, `monthly[_ ](request|credit|chat|spend)|weekly[_ ](rate[_ ])?limit|premium request`, "GitHub Copilot, Kiro, xAI, Fireworks, Anthropic (\"monthly spend limit\"), Claude: a weekly or monthly allowance"},
	{groupExtendedUsage, `you have no quota|\bquota_exceeded\b|quota is not enough|free (allocated |tier )?quota`, "GitHub Copilot, One API and New API gateways, Alibaba DashScope free tiers"},
	{groupExtendedUsage, `key limit exceeded|budget (has been )?exceeded|exceeded (your )?budget|budget_exceeded`, "OpenRouter key limits, LiteLLM proxy budgets"},
	{groupExtendedUsage, `(requires|need) a (grok )?subscription|limite de uso`, "Ollama cloud models, xAI; OpenAI Codex in Portuguese (\"limite de uso\")"},
	{groupExtendedUsage, `余额不足|欠费|使用上限`, "Zhipu, DeepSeek and other Chinese providers: insufficient balance, arrears, a usage cap"},

	// The extended set's further overflow wordings.
	{groupExtendedOverflow, `exceed context limit`, "Anthropic: \"input length and max_tokens exceed context limit: 174167 + 64000 > 200000\""},
	{groupExtendedOverflow, `prompt tokens \(\d+\) exceed model maximum`, "Amazon Bedrock (OpenAI Responses API)"},
	{groupExtendedOverflow, `expected maxLength: \d+, actual: \d+`, "Amazon Bedrock ValidationException: the input over the model's maximum"},
	{groupExtendedOverflow, `exceeds? (the )?(model's )?max(imum)? context length|(prompt|input)( length \d+)? exceeds (the )?max(imum)? length`, "OpenAI-compatible servers (mlx-serve and others: \"exceeds model's maximum context length\"), Volcengine, Zhipu (\"Prompt exceeds max length\")"},
	{groupExtendedOverflow, `input prompt \(\d+ tokens\) is too long|must be less than max_seq_len`, "vLLM; OpenAI-compatible servers (prompt_tokens over max_seq_len)"},
	{groupExtendedOverflow, `ran out of room in the model's context window|incomplete response returned, reason: max_output_tokens`, "OpenAI Codex: the context window is full"},
	{groupExtendedOverflow, `maximum request body size \d+ exceeded|payload size exceeds the limit`, "Google Gemini and Vertex AI: the request over the body size"},
	{groupExtendedOverflow, `(messages|input)\[\d+\]\.content'?: string too long`, "OpenAI: a message's content over the longest string"},
	{groupExtendedOverflow, `max_tokens must be at least 1, got -\d+`, "vLLM: the input leaves no room for output"},
	{groupExtendedOverflow, "`inputs` (tokens \\+ `max_new_tokens` must be <=|must have less than) \\d+", "Hugging Face TGI (also behind Together): input plus requested output over the limit"},
	{groupExtendedOverflow, `range of input length should be \[1, \d+\]`, "Alibaba DashScope (Qwen)"},
	{groupExtendedOverflow, `(message|prompt|input) exceeds (the )?token limit|model_max_prompt_tokens_exceeded`, "GitHub Copilot"},
	{groupExtendedOverflow, `model is loaded with context length of only \d+`, "LM Studio"},
	{groupExtendedOverflow, `larger than the max context size|input is too large to process|too big compared to kv size|exceed_context_size_error`, "llama.cpp server"},
	{groupExtendedOverflow, `prompt_limit`, "Anthropic-compatible relays (claude-code-hub): the error type of an over-long prompt"},

	// The extended set's errors that no retry fixes.
	{groupExtendedFatal, `too large for .* on tokens per min`, "OpenAI, Groq: a single request larger than the per-minute token budget"},

	// The extended set's budget arithmetic: fatal when Requested is above
	// Limit (overBudget).
	{groupExtendedBudget, `limit \d+, used \d+, requested ~?\d+`, "OpenAI, Groq: a rate limit stated as numbers; Requested above Limit is a request larger than the whole budget"},
	{groupExtendedFatal, `tool_use_id|tool_result`, "Anthropic: tool_use and tool_result blocks that do not pair up"},
	{groupExtendedFatal, `tool_call_id|no tool (call|output) found|must be a response to a preceeding message`, "OpenAI and compatible servers: tool calls and tool messages that do not pair up"},
	{groupExtendedFatal, `function (call|response) turn comes immediately after|after role .tool.`, "Google Gemini, Mistral: turns out of order around tool calls"},
	{groupExtendedFatal, `requires more system memory`, "Ollama: the model does not fit this machine"},
	{groupExtendedFatal, `model access is denied|not authorized to perform|access_terminated_error`, "Amazon Bedrock (IAM, Marketplace), Moonshot: the key may not use this model or endpoint"},
}

// The scanners, one per rule set. Bit i of a scan is the i-th group.
var (
	seedScanner     = compileScanner([]group{groupOverflow, groupNotOverflow, groupSeedRetry, groupUsageFlag})
	extendedScanner = compileScanner([]group{groupOverflow, groupNotOverflow, groupExtendedRetry, groupExtendedUsage, groupExtendedOverflow, groupExtendedFatal, groupExtendedBudget})
)

// The bits of a scan. The seed scanner has the first four groups only.
const (
	bitOverflow groupBits = 1 << iota
	bitNotOverflow
	bitRetry
	bitUsage
	bitOverflowMore // extended-overflow
	bitFatal        // extended-fatal
	bitBudget       // extended-budget: fatal when overBudget
)
