#!/usr/bin/env bash
# Walks through the interactive demo as a person would, in a tmux terminal:
# start the "cancelled" scenario with an 8 s first wait, watch the countdown,
# press Esc, and check the screen says the retry was cancelled.
#
# Usage: scripts/demo-walkthrough.sh [path/to/agentfsm]   (builds it when omitted)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v tmux >/dev/null || { echo "demo-walkthrough: tmux is not installed" >&2; exit 2; }
bin=${1:-}
if [ -z "$bin" ]; then
	bin=$(mktemp -d)/agentfsm
	go build -o "$bin" ./cmd/agentfsm
fi
name=agentfsm-walkthrough-$$
socket=$(mktemp -u)
tmx() { tmux -S "$socket" "$@"; }
trap 'tmx kill-server 2>/dev/null || true; rm -f "$socket"' EXIT

tmx new-session -d -s "$name" -x 120 -y 30 "$bin demo --scenario cancelled --base-delay-ms 8000; sleep 60"

# wait_for TEXT: poll the screen (every 0.1 s, 20 s at most) until TEXT shows.
wait_for() {
	for _ in $(seq 200); do
		if tmx capture-pane -p -t "$name" | grep -qF -- "$1"; then return 0; fi
		sleep 0.1
	done
	echo "demo-walkthrough: never saw: $1" >&2
	tmx capture-pane -p -t "$name" >&2
	return 1
}

wait_for "Retrying (1/3) in"
echo "countdown on screen:"
tmx capture-pane -p -t "$name" | grep -F "Retrying (1/3) in"
tmx send-keys -t "$name" Escape
wait_for "Retry failed after 1 attempts: Retry cancelled"
wait_for "outcome: cancelled: retry cancelled"
echo "after Esc:"
tmx capture-pane -p -t "$name" | grep -E "key    esc|Retry cancelled|outcome"
echo "demo-walkthrough: ok"
