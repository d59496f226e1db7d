#!/bin/sh
# --exec whose command writes inside the watched tree: no feedback loop,
# whether it rewrites one file (two runs), makes a new name each run or
# renames a temporary file into place (three runs); a user's change still
# runs it.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir d
while IFS='|' read -r max cmd; do
	rm -f runs err d/*; : > runs
	"$TOOL" -q -r --settle 50 --exec "echo run >> runs; $cmd" d </dev/null >out 2>err &
	WPID=$!
	wait_for "the command itself changes" err || fail "no warning: $(wc -l < runs) runs of $cmd"
	sleep 1
	n=$(wc -l < runs)
	[ "$n" -le "$max" ] || fail "$n runs of $cmd: a loop"
	: > d/user-edit
	i=0; while [ "$(wc -l < runs)" -le "$n" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	[ "$(wc -l < runs)" -gt "$n" ] || fail "a user's change did not run $cmd"
	stop_watch
done <<'CMDS'
2|date +%s%N > d/generated
3|date +%s%N > "d/gen-$(date +%s%N)"
3|echo x > d/out.tmp.$$; mv d/out.tmp.$$ d/out
CMDS
