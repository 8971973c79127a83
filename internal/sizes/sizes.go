// Package sizes holds the sizes compaction counts in, shared by package
// policy (which decides by them) and package session (whose
// AgentSummarizer bounds its summary alike): the token estimate of a
// message and the default bound of a summary. It is internal so that
// neither is part of the API: docs/session.md states the rules and the
// values.
package sizes

import (
	"encoding/base64"
	"image"
	_ "image/gif"  // an image's dimensions, for its token cost
	_ "image/jpeg" // an image's dimensions, for its token cost
	_ "image/png"  // an image's dimensions, for its token cost
	"math"
	"strings"

	"github.com/agentfsm/agentfsm/transcript"
)

// DigestChars is the default bound of a summary when neither the
// summarizer nor the request sets one: 20,000 characters, about 5,000
// tokens (policy.DigestSummarizer, session.AgentSummarizer).
const DigestChars = 20_000

// An image counts at what the provider charges for it, not at the length
// of its base64 data. Anthropic's figure is (width × height) / 750 tokens,
// the image first scaled down to fit 1,568 pixels on its long edge, and at
// most about 1,600 tokens (an image is scaled down to about 1.15
// megapixels); OpenAI's (85 + 170 a 512-pixel tile, high detail) is no
// higher. So an image whose dimensions its data gives (PNG, GIF or JPEG)
// counts as ceil(width × height / 750) tokens after that scaling, at most
// maxImageTokens, and one whose dimensions are unknown (no data, or another
// format) counts maxImageTokens: the provider's most, so an estimate never
// falls short for an image. The estimate counts an image as 4 characters a
// token, so the session's calibration ratio applies to it as to the rest.
const (
	maxImageTokens = 1600
	maxImageEdge   = 1568
)

// imageTokens is what an image block counts, in tokens (see
// maxImageTokens).
func imageTokens(b transcript.Block) int {
	if b.Data == "" {
		return maxImageTokens
	}
	// DecodeConfig reads only the header it needs of the decoded data.
	cfg, _, err := image.DecodeConfig(base64.NewDecoder(base64.StdEncoding, strings.NewReader(b.Data)))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return maxImageTokens
	}
	w, h := float64(cfg.Width), float64(cfg.Height)
	if long := max(w, h); long > maxImageEdge {
		w, h = w*maxImageEdge/long, h*maxImageEdge/long
	}
	return min(int(math.Ceil(w*h/750)), maxImageTokens)
}

// Tokens is the size of msgs in tokens as compaction estimates it:
// ceil(chars/4) a message, counting every block (see Message),
// saturating instead of overflowing.
func Tokens(msgs ...transcript.Message) int {
	n := 0
	for _, m := range msgs {
		n += min(Message(m), math.MaxInt-n)
	}
	return n
}

// Message is a message's size estimate, in tokens: ceil(chars/4),
// counting the characters (bytes of UTF-8) of its text, its thinking,
// each tool call's name and arguments, its error message, and 4
// characters a token of an image's cost (see maxImageTokens). Signatures
// are not counted, nor is an image's base64 data.
func Message(m transcript.Message) int {
	chars := len(m.ErrorMessage)
	add := func(n int) { chars += min(n, math.MaxInt-chars) }
	for _, b := range m.Content {
		switch b.Type {
		case transcript.BlockText:
			add(len(b.Text))
		case transcript.BlockThinking:
			add(len(b.Thinking))
		case transcript.BlockToolCall:
			add(len(b.Name))
			add(len(b.Arguments))
		case transcript.BlockImage:
			add(4 * imageTokens(b))
		}
	}
	return chars/4 + min(chars%4, 1)
}
