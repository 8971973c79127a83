package classify_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
)

// countsPath holds the numbers of the corpus's overflow rows.
const countsPath = "testdata/overflow-counts.tsv"

type counts struct{ prompt, limit int }

func readCounts(t *testing.T) map[string]counts {
	t.Helper()
	f, err := os.Open(countsPath)
	require.NoError(t, err)
	defer f.Close()
	out := map[string]counts{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		fields := strings.SplitN(sc.Text(), "\t", 3)
		require.Len(t, fields, 3, "%s:%d", countsPath, n)
		p, err1 := strconv.Atoi(fields[0])
		l, err2 := strconv.Atoi(fields[1])
		require.NoError(t, err1, "%s:%d", countsPath, n)
		require.NoError(t, err2, "%s:%d", countsPath, n)
		out[fields[2]] = counts{p, l}
	}
	require.NoError(t, sc.Err())
	return out
}

// issue 23 item 1: the classifier gives the numbers of every overflow text
// of the corpus that has them, and none for the others.
func TestOverflowCountsCorpus(t *testing.T) {
	want := readCounts(t)
	require.NotEmpty(t, want)
	seen := map[string]bool{}
	for _, r := range readCorpus(t) {
		for _, rules := range []classify.Rules{classify.Seed, classify.Extended} {
			res := rules.Classify(errMsg(r.message), now)
			if res.Class != classify.Overflow {
				assert.Zero(t, res.PromptTokens, "line %d: %s", r.line, rules)
				assert.Zero(t, res.ContextLimit, "line %d: %s", r.line, rules)
				continue
			}
			seen[r.message] = true
			w := want[r.message]
			assert.Equal(t, w, counts{res.PromptTokens, res.ContextLimit}, "line %d: %s: %s", r.line, rules, r.message)
		}
	}
	for m := range want {
		assert.True(t, seen[m], "%s lists a message that is no overflow row of the corpus: %s", countsPath, m)
	}
}

func TestOverflowCounts(t *testing.T) {
	for _, c := range []struct {
		text          string
		prompt, limit int
	}{
		{"400 prompt is too long: 210345 tokens > 200000 maximum", 210345, 200000},
		{"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.", 130512, 128000},
		{`{"error":{"code":400,"type":"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}`, 14429, 8192},
		{"PROMPT IS TOO LONG: 5 TOKENS > 4 MAXIMUM", 5, 4},
		{"prompt is too long", 0, 0},
		{"prompt is too long: 99999999999999999999 tokens > 200000 maximum", 0, 200000},
		{"prompt is too long: 1099511627777 tokens > 1099511627776 maximum", 0, 1 << 40},
		{"prompt is too long: tokens > ", 0, 0},
		{"prompt is too long: 1", 0, 0},
		{"prompt is too long: " + strings.Repeat("9 ", 100000) + "tokens > 7 maximum", 9, 7},
	} {
		res := classify.Extended.Classify(errMsg(c.text), now)
		assert.Equal(t, counts{c.prompt, c.limit}, counts{res.PromptTokens, res.ContextLimit}, c.text)
	}
	// The numbers are an overflow's only: a throttle's text gives none.
	res := classify.Extended.Classify(errMsg("429 rate limit: 210345 tokens > 200000 maximum"), now)
	assert.Equal(t, classify.Retryable, res.Class)
	assert.Zero(t, res.PromptTokens)
}
