//go:build !race

package history

const bigHistoryBatches = 100
