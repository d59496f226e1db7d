#!/bin/sh
# --exec: at most one run at a time; changes during a run queue one more
# run after it, given the paths that changed.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir d
start_watch --postpone --settle 50 --exec 'echo "start $*" >> log; while [ ! -e gate ]; do sleep 0.05; done; echo end >> log' d </dev/null
: > d/a
wait_for '^start d/a$' log || fail "no first run"
: > d/b; : > d/c
sleep 0.5
[ "$(grep -c start log)" = 1 ] || fail "a second run while the first ran: $(cat log)"
: > gate
wait_for '^start d/b d/c$' log || fail "no queued run: $(cat log)"
wait_for 'end' log
sleep 0.5
[ "$(cat log | tr '\n' '|')" = "start d/a|end|start d/b d/c|end|" ] || fail "log: $(cat log)"
