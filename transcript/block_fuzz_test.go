package transcript_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/internal/wiretext"
	"github.com/agentfsm/agentfsm/transcript"
)

var blockTypes = []transcript.BlockType{transcript.BlockText, transcript.BlockImage, transcript.BlockThinking, transcript.BlockToolCall}

// FuzzBlockCodec writes a block of any type holding any bytes in any field
// (its arguments included), inside a message with any header, and reads it
// back; and reads arbitrary bytes as a block. Writing fails only for an
// unknown type or arguments that are not a JSON object; what it writes is
// valid JSON in valid UTF-8 with no raw U+2028 or U+2029, which reads back
// as the block under the text rule (each field as wiretext has it, the
// arguments compacted), which writes as the block under the rule does. Reading never
// panics, and what it reads writes valid JSON that reads back the same.
// Run it longer with:
// go test ./transcript -run '^$' -fuzz FuzzBlockCodec -fuzztime 3m -parallel 1
func FuzzBlockCodec(f *testing.F) {
	f.Add(uint8(0), "hi <b> & é", "c2ln", "", false, []byte(nil), "retry-after", []byte(`{"type":"text","text":"x"}`))
	f.Add(uint8(1), "iVBORw0KGgo=", "image/png", "", false, []byte(nil), "", []byte(`{"type":"image","data":"\xff","mimeType":"\ud800"}`))
	f.Add(uint8(2), "b3BhcXVl", "sig\xfe", "", true, []byte(nil), "x-\xff", []byte(`{"type":"thinking","thinking":"\udc00\ud83d\ude00","redacted":true}`))
	f.Add(uint8(3), "toolu_\xc3", "read\xed\xa0\x80", "", false, []byte("{\"path\":\"\xff<a>&b\u2028\",\"n\":[1,2.50,\"\\ud800\"]}"), "",
		[]byte("{\"type\":\"toolCall\",\"id\":\"c\",\"name\":\"n\",\"arguments\":{ \"a\" : \"\xff\\udbff\u2029\" }}"))
	f.Add(uint8(3), "c", "n", "", false, []byte(`[1]`), "", []byte(`{"type":"toolCall","arguments":"x"}`))
	f.Add(uint8(3), "c", "n", "", false, []byte("{\"a\":\"\x00\"}"), "", []byte("{\"type\":\"text\",\"text\":\"\x00\"}"))
	f.Add(uint8(7), "x", "y", "z", false, []byte(`{}`), "", []byte(`{"type":"audio"}`))
	f.Fuzz(func(t *testing.T, kind uint8, s1, s2, s3 string, flag bool, args []byte, header string, raw []byte) {
		b := transcript.Block{Type: transcript.BlockType(s3)}
		if int(kind) < len(blockTypes) {
			b.Type = blockTypes[kind]
		}
		switch b.Type {
		case transcript.BlockText:
			b.Text, b.TextSignature = s1, s2
		case transcript.BlockImage:
			b.Data, b.MimeType = s1, s2
		case transcript.BlockThinking:
			b.Thinking, b.ThinkingSignature, b.Redacted = s1, s2, flag
		case transcript.BlockToolCall:
			b.ID, b.Name = s1, s2
			if args != nil || flag {
				b.Arguments = args
			}
		}
		out, err := write(b)
		known := int(kind) < len(blockTypes)
		object := b.Arguments == nil || json.Valid(b.Arguments) && bytes.TrimLeft(b.Arguments, " \t\r\n")[0] == '{'
		if err != nil {
			if known && object {
				t.Fatalf("writing %#v: %v", b, err)
			}
		} else {
			if !known || !object {
				t.Fatalf("wrote %#v as %q", b, out)
			}
			checkLine(t, out)
			var back transcript.Block
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatalf("reading %q back: %v", out, err)
			}
			want := underRule(t, b)
			if !equalBlocks(want, back) {
				t.Fatalf("%#v\nwrote %q\nread  %#v\nwant  %#v", b, out, back, want)
			}
			again, err := write(back)
			if wantOut, _ := write(want); err != nil || !bytes.Equal(again, wantOut) {
				t.Fatalf("written again: %q (%v), the block under the rule: %q", again, err, wantOut)
			}
			m := transcript.Message{ID: s2, Role: transcript.RoleAssistant, Content: []transcript.Block{b}, ErrorMessage: s1,
				Headers: map[string]string{header: s1, header + "\xff": s2, header + "\xfe": s3}}
			mout, err := write(m)
			if err != nil {
				t.Fatalf("writing the message: %v", err)
			}
			checkLine(t, mout)
			var mback transcript.Message
			if err := json.Unmarshal(mout, &mback); err != nil {
				t.Fatalf("reading the message %q: %v", mout, err)
			}
			if !equalBlocks(back, mback.Content[0]) {
				t.Fatalf("the message's block reads %#v, alone %#v", mback.Content[0], back)
			}
		}

		var read transcript.Block
		if json.Unmarshal(raw, &read) != nil {
			return
		}
		out, err = write(read)
		if err != nil {
			t.Fatalf("%q read as %#v, which does not write: %v", raw, read, err)
		}
		checkLine(t, out)
		var back transcript.Block
		if err := json.Unmarshal(out, &back); err != nil || !equalBlocks(read, back) {
			t.Fatalf("%q read as %#v, wrote %q, read back %#v (%v)", raw, read, out, back, err)
		}
	})
}

// write is v's JSON as the session's encoders write it: without HTML
// escaping.
func write(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// checkLine fails unless line is valid JSON in valid UTF-8, with no raw
// U+2028 or U+2029 (which JavaScript reads as line breaks).
func checkLine(t *testing.T, line []byte) {
	t.Helper()
	switch {
	case !utf8.Valid(line):
		t.Fatalf("not UTF-8: %q", line)
	case !json.Valid(line):
		t.Fatalf("not JSON: %q", line)
	case bytes.ContainsRune(line, '\u2028') || bytes.ContainsRune(line, '\u2029'):
		t.Fatalf("a raw line separator: %q", line)
	}
}

// underRule is b as the text rule has it: each string field as
// wiretext.String has it, the arguments as wiretext.JSON has them,
// compacted ({} for none).
func underRule(t *testing.T, b transcript.Block) transcript.Block {
	s := wiretext.String
	want := transcript.Block{Type: b.Type, Text: s(b.Text), TextSignature: s(b.TextSignature), Data: s(b.Data), MimeType: s(b.MimeType),
		Thinking: s(b.Thinking), ThinkingSignature: s(b.ThinkingSignature), Redacted: b.Redacted, ID: s(b.ID), Name: s(b.Name)}
	if b.Type == transcript.BlockToolCall {
		args := b.Arguments
		if args == nil {
			args = json.RawMessage(`{}`)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, wiretext.JSON(args)); err != nil {
			t.Fatal(err)
		}
		want.Arguments = buf.Bytes()
	}
	return want
}

func equalBlocks(a, b transcript.Block) bool {
	return bytes.Equal(a.Arguments, b.Arguments) && a.Type == b.Type && a.Text == b.Text && a.TextSignature == b.TextSignature &&
		a.Data == b.Data && a.MimeType == b.MimeType && a.Thinking == b.Thinking && a.ThinkingSignature == b.ThinkingSignature &&
		a.Redacted == b.Redacted && a.ID == b.ID && a.Name == b.Name
}
