//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// processUID is the user a settings file may belong to besides root: the
// process's effective user (a variable for the tests).
var processUID = os.Geteuid

// checkSettingsOwner refuses a settings file another user could have
// written: one of a user other than this process's or root, or one anyone
// may write to. A settings file names the environment variables whose
// values are sent as keys, and the base URL they are sent to; whoever can
// write it can send them elsewhere. A file that is not a regular file (a
// pipe, --settings <(...)) is not checked.
func checkSettingsOwner(path string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return nil
	}
	if uid := int(st.Uid); uid != processUID() && uid != 0 {
		return fmt.Errorf("%s: belongs to user %d, neither this process's user %d nor root: "+
			"whoever can write a settings file chooses where keys are sent", path, uid, processUID())
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return fmt.Errorf("%s: writable by every user (mode %v): whoever can write a settings file "+
			"chooses where keys are sent (chmod o-w %s)", path, fi.Mode().Perm(), path)
	}
	return nil
}
