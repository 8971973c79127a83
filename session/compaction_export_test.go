package session

// EstimateTokens is the session's size estimate of msgs, in tokens, as
// compaction counts it.
func EstimateTokens(msgs ...Message) int {
	n := 0
	for _, m := range msgs {
		n += estimateTokens(m)
	}
	return n
}
