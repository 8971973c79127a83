package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transitions"
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

// keepResetWaits subscribes to s: when a wait for a reset starts, it says
// so on stderr in words (unless words is false: with --events, stderr
// holds event lines only, whose auto_retry_start says it); with a history (path not ""), it writes the
// session's snapshot to path, and removes it when the turn settles, but
// for a turn settled while the process is being stopped (keep reports
// true): that one resumes when chat starts again. Errors writing it are
// said on stderr and lose nothing else.
func keepResetWaits(s *session.Session, stderr io.Writer, words bool, path string, keep func() bool) (unsubscribe func()) {
	var start events.AutoRetryStart
	return s.SubscribeSession(func(s *session.Session, ev events.Event) {
		switch e := ev.(type) {
		case events.AutoRetryStart:
			start = e
		case events.StateChange:
			if e.Trigger != transitions.WaitReset {
				break
			}
			// The snapshot first, the words after: once they are out,
			// a restart resumes the wait.
			if path != "" {
				snap, err := s.Snapshot()
				if err == nil {
					err = writeWaitFile(path, snap)
				}
				if err != nil {
					fmt.Fprintf(stderr, "agentfsm chat: --history: cannot keep the wait for a restart: %s\n", terminalSafe(err.Error(), false))
				}
			}
			if !words {
				break
			}
			fmt.Fprintf(stderr, "agentfsm chat: %s: waiting until %s (%s) for the limit to reset, then the turn goes on (Ctrl-C stops)\n",
				start.ErrorClass, start.ResetAt.UTC().Format(time.RFC3339), time.Duration(start.DelayMs)*time.Millisecond)
		case events.AutoRetryEnd:
			if words && e.ResetWait && e.Success {
				fmt.Fprintf(stderr, "agentfsm chat: the limit reset; the turn went on after waiting for it\n")
			}
		case events.TurnSettled:
			if path != "" && !keep() {
				if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
					fmt.Fprintf(stderr, "agentfsm chat: --history: %s\n", terminalSafe(err.Error(), false))
				}
			}
		}
	})
}
