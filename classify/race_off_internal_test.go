//go:build !race

package classify

const acrossTheMiddleStride = 1
