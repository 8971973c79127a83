package sizes

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentfsm/agentfsm/transcript"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Estimates count every block: text and thinking characters, a tool
// call's name and arguments, and an image whose dimensions are unknown as
// maxImageTokens; signatures and image data are not counted (issue 13
// item 1).
func TestMessageCountsEveryBlock(t *testing.T) {
	m := transcript.Message{Role: transcript.RoleAssistant, Content: []transcript.Block{
		{Type: transcript.BlockText, Text: "abcd", TextSignature: "ignored"},
		{Type: transcript.BlockThinking, Thinking: "efgh", ThinkingSignature: "ignored"},
		{Type: transcript.BlockToolCall, ID: "c1", Name: "read", Arguments: json.RawMessage(`{"p":1}`)},
		{Type: transcript.BlockImage, Data: "aWdub3JlZA==", MimeType: "image/png"},
	}, ErrorMessage: "err"}
	chars := 4 + 4 + len("read") + len(`{"p":1}`) + 4*maxImageTokens + 3
	if got, want := Message(m), (chars+3)/4; got != want {
		t.Errorf("estimate %d, want %d", got, want)
	}
}

// An image counts at its provider's token cost, not its base64 length
// (issue 23 item 5): (width × height) / 750 tokens rounded up, scaled to
// 1,568 pixels on the long edge, at most 1,600; 1,600 when its data gives
// no dimensions.
func TestImageCountsAtTheProvidersCost(t *testing.T) {
	encode := func(w, h int, enc func(*bytes.Buffer, image.Image) error) string {
		var buf bytes.Buffer
		if err := enc(&buf, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(buf.Bytes())
	}
	pngOf := func(b *bytes.Buffer, m image.Image) error { return png.Encode(b, m) }
	jpegOf := func(b *bytes.Buffer, m image.Image) error { return jpeg.Encode(b, m, nil) }
	gifOf := func(b *bytes.Buffer, m image.Image) error { return gif.Encode(b, m, nil) }
	cases := []struct {
		name, data string
		want       int
	}{
		{"png 1000×500", encode(1000, 500, pngOf), 667},
		{"jpeg 200×150", encode(200, 150, jpegOf), 40},
		{"gif 10×10", encode(10, 10, gifOf), 1},
		{"png 1568×700, the long edge's limit", encode(1568, 700, pngOf), 1464},
		{"png 4000×300, scaled to 1568×117.6", encode(4000, 300, pngOf), 246},
		{"png 1500×1500, capped", encode(1500, 1500, pngOf), 1600},
		{"no data", "", 1600},
		{"not an image", base64.StdEncoding.EncodeToString([]byte("not an image at all")), 1600},
		{"not base64", "%%%%", 1600},
	}
	for _, c := range cases {
		img := transcript.Message{Role: transcript.RoleUser, Content: []transcript.Block{{Type: transcript.BlockImage, Data: c.data, MimeType: "image/png"}}}
		if got := Tokens(img); got != c.want {
			t.Errorf("%s: %d tokens, want %d (base64 of %d characters)", c.name, got, c.want, len(c.data))
		}
	}
}
