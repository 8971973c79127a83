//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package history

import "os"

// openFlags: without O_NONBLOCK here, opening a FIFO waits for a writer
// before it can be refused.
const openFlags = 0

// lockFile does nothing on a platform without flock(2): nothing stops a
// second FileHistory on the same file, and keeping to one is the caller's
// task.
func lockFile(*os.File) error { return nil }

// processUID: files have no owner this package reads here.
func processUID() int { return -1 }

// foreignOwner: where files have no owner this package reads, none is
// foreign.
func foreignOwner(os.FileInfo) int { return -1 }
