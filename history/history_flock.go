//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package history

import (
	"errors"
	"os"
	"syscall"
)

// processUID is the user a history file must belong to: the process's
// effective user (a variable for the tests).
var processUID = os.Geteuid

// foreignOwner returns the user that owns the file fi describes when that
// is not processUID, and -1 when it is, or when fi does not say.
func foreignOwner(fi os.FileInfo) int {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == processUID() {
		return -1
	}
	return int(st.Uid)
}

// openFlags makes opening a FIFO return at once instead of waiting for a
// writer, so that it can be refused.
const openFlags = syscall.O_NONBLOCK

// lockFile takes an exclusive flock(2) on f without waiting: it fails with
// ErrHistoryLocked when another open file holds one, in this process or
// another. Closing f releases it.
func lockFile(f *os.File) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var lockErr error
	err = conn.Control(func(fd uintptr) {
		for {
			lockErr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if lockErr != syscall.EINTR {
				return
			}
		}
	})
	switch {
	case err != nil:
		return err
	case errors.Is(lockErr, syscall.EWOULDBLOCK):
		return ErrHistoryLocked
	case lockErr != nil:
		return &os.PathError{Op: "flock", Path: f.Name(), Err: lockErr}
	}
	return nil
}
