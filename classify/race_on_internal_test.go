//go:build race

package classify

// acrossTheMiddleStride: under the race detector, which finds nothing in
// the scanner (it runs on one goroutine) and slows the regexps it is
// checked against some tenfold, TestScannerSeesLiteralsAcrossTheMiddle
// checks one placement in eleven, a prime, so that every example and
// every length is still checked at some offsets; .ci/run checks every
// placement without the race detector.
const acrossTheMiddleStride = 11
