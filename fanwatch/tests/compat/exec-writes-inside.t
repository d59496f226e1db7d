#!/bin/sh
# --exec whose command writes inside the watched tree: no feedback loop.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir d
"$TOOL" -q -r --settle 50 --exec 'echo run >> runs; date +%s%N > d/generated' d >out 2>err &
WPID=$!
sleep 3
n=$(wc -l < runs)
[ "$n" -le 2 ] || fail "$n runs: a loop"
grep -q "the command itself changes d/generated" err || fail "no warning"
: > d/user-edit
i=0; while [ "$(wc -l < runs)" -le "$n" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(wc -l < runs)" -gt "$n" ] || fail "a user's change did not run it"
