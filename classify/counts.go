package classify

import "strings"

// countPattern is a number in an overflow's error text, known by the text
// right before it and right after it (either may be empty), compared
// without regard to ASCII case.
type countPattern struct {
	before, after string
	source        string
}

// promptCountPatterns find the size of the request that overflowed, in
// tokens by the provider's count, in the order they are tried.
var promptCountPatterns = []countPattern{
	{"", " tokens > ", `Anthropic, Amazon Bedrock: "prompt is too long: 210345 tokens > 200000 maximum"`},
	{"exceed context limit: ", " + ", `Anthropic: "input length and max_tokens exceed context limit: 174167 + 64000 > 200000"`},
	{"resulted in ", " tokens", `OpenAI, Azure: "your messages resulted in 130512 tokens"`},
	{"(", " in the messages", `OpenAI, Azure: "you requested 8191 tokens (624 in the messages, 7567 in the completion)"`},
	{"(", " in your prompt", `OpenRouter, Azure: "(8977 in your prompt; 0 for the completion)"`},
	{"(", " of text input", `OpenRouter: "(10535 of text input, 131072 in the output)"`},
	{`"n_prompt_tokens":`, "", `llama.cpp server's exceed_context_size_error: "n_prompt_tokens":14429`},
	{`"n_prompt_tokens\":`, "", `the same, in JSON inside a JSON string`},
	{"input token count (", ")", `Google Gemini: "The input token count (81881) exceeds the maximum"`},
	{"prompt tokens (", ")", `Amazon Bedrock: "prompt tokens (330095) exceed model maximum (278528)"`},
	{"request contains ", " tokens", `xAI: "but the request contains 907154 tokens"`},
	{"input length (", ")", `OpenAI-compatible servers: "Input length (265330) exceeds model's maximum context length (262144)"`},
	{"input prompt (", " tokens)", `vLLM: "Input prompt (36893 tokens) is too long"`},
	{`"n_prompt_tokens": `, "", `llama.cpp server, with a space`},
	{"prompt token count of ", " exceeds", `GitHub Copilot: "prompt token count of 138898 exceeds the limit of 64000"`},
	{"request (", " tokens)", `llama.cpp server: "request (355724 tokens) exceeds the available context size (262144 tokens)"`},
	{"input length ", " exceeds", `Volcengine: "Input length 203743 exceeds the maximum length 202752"`},
	{"prompt_tokens (", ")", `vLLM: "length of prompt_tokens (163280) must be less than max_seq_len (32768)"`},
	{"current length is ", " while", `Qwen: "Current length is 42328 while limit is 40000"`},
	{"request has ", " input tokens", `vLLM: "your request has 8 input tokens"`},
	{"given: ", " `inputs` tokens", "Hugging Face TGI: \"Given: 2019 `inputs` tokens and 30 `max_new_tokens`\""},
	{" got ", `"`, `Mistral: "Too many tokens in batch. Max is 16384 got 17555"`},
}

// limitCountPatterns find the model's limit the request went over, in
// tokens, in the order they are tried.
var limitCountPatterns = []countPattern{
	{" tokens > ", " maximum", "Anthropic, Amazon Bedrock"},
	{" > ", ", decrease input length", "Anthropic's input length and max_tokens"},
	{"maximum context length is ", " tokens", "OpenAI, Azure, OpenRouter"},
	{"limit of ", " tokens", `Azure: "Input tokens exceed the configured limit of 272000 tokens"`},
	{`"n_ctx":`, "", "llama.cpp server's exceed_context_size_error"},
	{`"n_ctx\":`, "", "the same, in JSON inside a JSON string"},
	{"maximum number of tokens allowed (", ")", "Google Gemini"},
	{"exceed model maximum (", ")", "Amazon Bedrock"},
	{"maximum prompt length is ", " but", "xAI"},
	{"maximum context length (", ")", "OpenAI-compatible servers"},
	{"too large for model with ", " maximum context length", "Mistral"},
	{`"n_ctx": `, "", "llama.cpp server, with a space"},
	{"limit of ", "", `GitHub Copilot, vLLM: "exceeds the limit of 64000"`},
	{"context size (", " tokens)", "llama.cpp server"},
	{"exceeds the maximum length ", "", "Volcengine"},
	{"max_seq_len (", ")", "vLLM"},
	{"while limit is ", "", "Qwen"},
	{"must be <= ", ".", "Hugging Face TGI"},
	{"must have less than ", " tokens", "Hugging Face TGI"},
	{"model token limit: ", "", "Kimi"},
	{"max is ", " got", "Mistral"},
}

// maxCount bounds the counts read: a larger number is no token count.
const maxCount = 1 << 40

// overflowCounts reads the numbers of an overflow's error text: the size
// of the request in tokens as the provider counted it (prompt) and the
// limit it went over (limit), each 0 when the text does not give it (see
// Result.PromptTokens). It does not allocate.
func overflowCounts(text string) (prompt, limit int) {
	return findCount(text, promptCountPatterns), findCount(text, limitCountPatterns)
}

// findCount returns the first number of text that one of ps frames, in the
// order of ps, 0 when none does.
func findCount(text string, ps []countPattern) int {
	for _, p := range ps {
		for i := 0; i < len(text); {
			if !isDigit(text[i]) {
				i++
				continue
			}
			j := i
			for j < len(text) && isDigit(text[j]) {
				j++
			}
			if hasSuffixFold(text[:i], p.before) && hasPrefixFold(text[j:], p.after) {
				if n, ok := parseCount(text[i:j]); ok {
					return n
				}
			}
			i = j
		}
	}
	return 0
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

// parseCount reads a run of digits, false when it is above maxCount.
func parseCount(digits string) (int, bool) {
	n := 0
	for i := 0; i < len(digits); i++ {
		n = n*10 + int(digits[i]-'0')
		if n > maxCount {
			return 0, false
		}
	}
	return n, true
}
