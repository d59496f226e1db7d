#!/bin/sh
# --exec loses no edit: a file saved again while the command runs (its
# bytes changed) always leads to one more run, as does another file; such
# edits are not taken for the command's own writes, however many runs in
# a row they start.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir d
start_watch --postpone --settle 50 --exec 'echo "start $*" >> log; while [ ! -e gate ]; do sleep 0.02; done; rm gate; echo end >> log' d </dev/null
nruns() { grep -c start log 2>/dev/null || echo 0; }
echo 1 > d/same
wait_for "^start d/same$" log || fail "no first run"
# Each edit is made while the run before runs, then that run ends.
for e in 2 3 4 5 6 7; do
	case $e in
	2|3|4) echo "$e" > d/same; f=d/same ;;
	*) echo "$e" > "d/other$e"; f=d/other$e ;;
	esac
	sleep 0.2
	: > gate
	n=0
	while [ "$(nruns)" -lt "$e" ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n + 1)); done
	[ "$(nruns)" = "$e" ] || fail "$(nruns) runs after $e edits: $(cat log)"
	[ "$(tail -n 1 log)" = "start $f" ] || fail "run $e was not for $f: $(cat log)"
done
: > gate
sleep 0.5
[ "$(nruns)" = 7 ] || fail "$(nruns) runs for 7 edits: $(cat log)"
grep -q warning err && fail "warned: $(cat err)"
exit 0
