#!/bin/sh
# --exec (fanwatch): changes within --settle ms make one run, given the
# changed paths in "$@" and FANWATCH_PATHS.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir d
"$TOOL" -q --postpone --settle 300 --exec 'echo "$# $*" >> runs; printf "%s\n" "$FANWATCH_PATHS" > env' d >out 2>err &
WPID=$!
sleep 1
: > d/a; : > d/b
wait_for '^2 ' runs || fail "no run"
sleep 1
[ "$(wc -l < runs)" = 1 ] || fail "$(wc -l < runs) runs"
grep -qx '2 d/a d/b' runs || fail "runs: $(cat runs)"
[ "$(cat env)" = "d/a
d/b" ] || fail "env: $(cat env)"
