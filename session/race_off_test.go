//go:build !race

package session_test

const cjkTurnsDefault = 10_000
