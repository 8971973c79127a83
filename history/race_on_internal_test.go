//go:build race

package history

// bigHistoryBatches: under the race detector, which finds nothing in
// reading a file on one goroutine and slows its JSON decoding some
// tenfold, TestFileHistoryReopenReadsOnlyTheTail writes 2 MB of history
// (2,000 messages), where its 20 MB took half a minute; the tail it reads
// is the same 16 KB. .ci/run plays the 20 MB without the race detector.
const bigHistoryBatches = 10
