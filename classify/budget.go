package classify

// OpenAI and Groq word a rate limit as "… Limit 30000, Used 22999,
// Requested 12528 …". When Requested alone is above Limit, no wait lets the
// request through: it is larger than the whole budget (the per-minute
// tokens, usually), and the extended rules call it fatal.

// budgetLits are the words between the numbers, lowered.
var budgetLits = [...][]byte{[]byte("limit "), []byte(", used "), []byte(", requested ")}

// overBudget reports whether text holds "limit N, used U, requested R" (any
// case, R possibly after a "~") with R > N. It does not allocate.
func overBudget(text string) bool {
	for at := 0; ; {
		i := indexLower(text[at:], budgetLits[0])
		if i < 0 {
			return false
		}
		at += i + 1
		pos := at - 1 + len(budgetLits[0])
		limit, pos, ok := readCount(text, pos)
		if !ok || !hasLitAt(text, pos, budgetLits[1]) {
			continue
		}
		if _, pos, ok = readCount(text, pos+len(budgetLits[1])); !ok || !hasLitAt(text, pos, budgetLits[2]) {
			continue
		}
		pos += len(budgetLits[2])
		if pos < len(text) && text[pos] == '~' {
			pos++
		}
		if requested, _, ok := readCount(text, pos); ok && requested > limit {
			return true
		}
	}
}

// readCount reads the decimal number at pos (at most 18 digits, so it
// cannot overflow) and returns it with the offset after it.
func readCount(text string, pos int) (n uint64, end int, ok bool) {
	end = pos
	for end < len(text) && isDigit(text[end]) && end-pos < 18 {
		n = n*10 + uint64(text[end]-'0')
		end++
	}
	if end < len(text) && isDigit(text[end]) {
		return 0, end, false // longer than 18 digits
	}
	return n, end, end > pos
}
