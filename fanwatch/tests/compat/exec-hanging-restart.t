#!/bin/sh
# --exec --restart: a command that hangs is stopped by the next change and
# run again; SIGTERM to fanwatch leaves no command behind.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir d
"$TOOL" -q --restart --settle 50 --exec 'echo $$ >> pids; exec sleep 1000' d >out 2>err &
WPID=$!
wait_for . pids || fail "no first run"
: > d/x
i=0; while [ "$(wc -l < pids)" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(wc -l < pids)" -ge 2 ] || fail "not restarted"
first=$(sed -n 1p pids); last=$(tail -n 1 pids)
kill -0 "$first" 2>/dev/null && fail "the first run still lives"
kill "$WPID"; wait "$WPID"; WPID=
sleep 0.2
kill -0 "$last" 2>/dev/null && fail "the command outlived fanwatch"
exit 0
