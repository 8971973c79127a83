//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package session

import "os"

// openFlags: without O_NONBLOCK here, opening a FIFO waits for a writer
// before it can be refused.
const openFlags = 0

// lockFile does nothing on a platform without flock(2): nothing stops a
// second FileHistory on the same file, and keeping to one is the caller's
// task.
func lockFile(*os.File) error { return nil }
