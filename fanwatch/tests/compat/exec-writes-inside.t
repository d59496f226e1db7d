#!/bin/sh
# --exec whose command writes inside the watched tree: no feedback loop
# once the command writes the same bytes again (two runs), whether it
# rewrites one file, writes it in two steps (a version seen on the way
# is one a run may read: one more run at most to learn the steps), or
# renames a temporary into place; a command whose
# output differs each run (a timestamp) still runs, but further and
# further apart, with a warning; a user's change still runs it.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir d
while IFS='|' read -r max cmd; do
	rm -f runs err d/*; : > runs
	"$TOOL" -q -r --settle 50 --exec "echo run >> runs; $cmd" d </dev/null >out 2>err &
	WPID=$!
	wait_for . runs || fail "no first run of $cmd"
	sleep 1.5
	n=$(wc -l < runs)
	[ "$n" -le "$max" ] || fail "$n runs of $cmd in 1.5 s: a loop"
	[ "$max" -gt 3 ] && { grep -q "different bytes each time" err || fail "no warning for $cmd"; }
	[ "$max" -le 3 ] && grep -q "warning" err && fail "a warning for $cmd: $(cat err)"
	sleep 0.2
	n=$(wc -l < runs)
	echo edit > d/user-edit
	i=0; while [ "$(wc -l < runs)" -le "$n" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	[ "$(wc -l < runs)" -gt "$n" ] || fail "a user's change did not run $cmd"
	stop_watch
done <<'CMDS'
2|echo same > d/generated
3|echo a > d/steps; sleep 0.05; echo b >> d/steps
2|echo x > d/out.tmp.$$; mv d/out.tmp.$$ d/out
16|date +%s%N > d/generated
CMDS
