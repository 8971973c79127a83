package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIsTerminalOnPTY: a pseudo-terminal is a terminal, on both its sides.
// Issue item 17.
func TestIsTerminalOnPTY(t *testing.T) {
	pts := openPTY(t)
	assert.True(t, isTerminal(pts))
	assert.True(t, interactive(&environment{stdin: pts, stdout: pts}))
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	require.NoError(t, err)
	defer null.Close()
	assert.False(t, interactive(&environment{stdin: pts, stdout: null}), "stdout on /dev/null")
	assert.False(t, interactive(&environment{stdin: null, stdout: pts}), "stdin on /dev/null")
}

// openPTY opens a pseudo-terminal and returns its terminal side; both
// sides are closed when the test ends.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	_, pts := openPTYPair(t)
	return pts
}

// openPTYPair opens a pseudo-terminal and returns its controlling side
// (which reads what is written to the terminal) and its terminal side;
// both are closed when the test ends.
func openPTYPair(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	var unlock, n uint32
	require.NoError(t, ioctl(ptmx, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)))
	require.NoError(t, ioctl(ptmx, syscall.TIOCGPTN, unsafe.Pointer(&n)))
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { pts.Close() })
	return ptmx, pts
}

func ioctl(f *os.File, req uint, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(req), uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}
