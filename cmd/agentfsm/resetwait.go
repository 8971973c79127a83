package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentfsm/agentfsm/policy"
)

// A turn that waits for a usage limit's reset (retry.waitForReset) may
// wait for hours. With --history, chat keeps the session's snapshot beside
// the history file while it waits (waitFile), so that a chat started again
// on the same history resumes the wait, to the same instant, and the turn
// after it; the file goes once the turn settles.

// waitFile is where chat keeps the snapshot of a turn waiting for a reset,
// beside the history at historyPath.
func waitFile(historyPath string) string { return historyPath + ".reset-wait" }

// maxWaitFileSize bounds the snapshot chat reads back: it holds no
// message but a prompt, so a large one is no snapshot of chat's.
const maxWaitFileSize = 1 << 20

// readWaitFile reads the snapshot kept at path; ok is false when there is
// none. An unreadable or invalid file is an error that says so.
func readWaitFile(path string) (snap policy.Snapshot, ok bool, err error) {
	// Only a regular file: opening a FIFO left at that path would block
	// chat before it starts.
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return policy.Snapshot{}, false, fmt.Errorf("%s: not a regular file (%s)", path, fi.Mode().Type())
	}
	data, err := readBounded(path, maxWaitFileSize, "snapshot of a turn waiting for a reset")
	if errors.Is(err, os.ErrNotExist) {
		return policy.Snapshot{}, false, nil
	}
	if err != nil {
		return policy.Snapshot{}, false, err
	}
	if err := json.Unmarshal(data, &snap); err != nil {
		return policy.Snapshot{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return snap, true, nil
}

// writeWaitFile writes snap to path whole or not at all: a temporary file
// beside it, renamed over it, readable by its owner only.
func writeWaitFile(path string, snap policy.Snapshot) error {
	data, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
