#!/bin/sh
# --exec under a terminal: the command's stdin is /dev/null, so one that
# reads it ends; one that opens /dev/tty fails at once (it runs in its own
# session, with no controlling terminal) instead of being stopped, and
# fanwatch goes on running the command for later changes.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
command -v script > /dev/null || { echo "no script(1)" >&2; exit 77; }
# A chroot without /dev/pts (a package build's) has no terminal to give.
script -qec true /dev/null < /dev/null > /dev/null 2>&1 ||
	{ echo "script(1) cannot make a pseudo-terminal here (is /dev/pts mounted?)" >&2; exit 77; }
mkdir d
# script(1) gives fanwatch a terminal, as a user's shell would.
script -qec "$TOOL -q --settle 50 --exec 'echo run >> runs; read x; echo \"read:\$?\" >> runs' d" /dev/null < /dev/null > out 2>&1 &
WPID=$!
wait_for 'read:' runs || fail "the command reading stdin did not end: $(cat runs 2>/dev/null)"
: > d/a
wait_for 'read:.*' runs && i=0
while [ "$(grep -c read: runs)" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ "$(grep -c read: runs)" -ge 2 ] || fail "no second run: $(cat runs)"
stop_watch
rm -f runs
script -qec "$TOOL -q --settle 50 --exec 'echo run >> runs; read x < /dev/tty; echo \"after:\$?\" >> runs' d" /dev/null < /dev/null > out 2>&1 &
WPID=$!
wait_for after runs || fail "the run reading /dev/tty did not end: $(cat runs 2>/dev/null)"
grep -q 'after:0' runs && fail "the command read the terminal"
: > d/b
i=0; while [ "$(grep -c after runs)" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ "$(grep -c after runs)" -ge 2 ] || fail "fanwatch stopped running the command: $(cat runs; cat out)"
grep -q stopped out && fail "a run was stopped: $(cat out)"
exit 0
