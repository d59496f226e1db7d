#!/bin/sh
# --exec --restart, then an interrupt (Ctrl-C sends SIGINT to fanwatch's
# process group; the command has its own): fanwatch ends the command and
# itself with status 0, and says nothing false about an exit status.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir d
# The command dies at once on SIGTERM: its exit is often reaped with the
# interrupt itself, the case that was reported; five times over.
for round in 1 2 3 4 5; do
rm -f runs
"$TOOL" -q --restart --settle 50 --exec 'echo run >> runs; exec sleep 1000' d </dev/null >out 2>err &
WPID=$!
wait_for run runs || fail "no first run"
: > d/x
i=0; while [ "$(wc -l < runs)" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ "$(wc -l < runs)" -ge 2 ] || fail "not restarted"
kill -INT "$WPID"
wait "$WPID"
rc=$?
WPID=
[ $rc = 0 ] || fail "status $rc after SIGINT"
grep -q "exited with status" err && fail "a false message in round $round: $(cat err)"
done
exit 0
