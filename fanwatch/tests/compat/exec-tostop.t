#!/bin/sh
# --exec under a terminal set to `stty tostop`: a command that prints,
# even one that sets SIGTTOU back to its default first, is never stopped
# (it runs in its own session, with no controlling terminal: its output
# reaches the terminal, job control does not apply), and every run
# completes.  When the terminal closes (SIGHUP), fanwatch ends the
# running command too, which is in no group the terminal signals.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
command -v script > /dev/null || { echo "no script(1)" >&2; exit 77; }
command -v python3 > /dev/null || { echo "no python3" >&2; exit 77; }
script -qec true /dev/null < /dev/null > /dev/null 2>&1 ||
	{ echo "script(1) cannot make a pseudo-terminal here (is /dev/pts mounted?)" >&2; exit 77; }
mkdir d
cat > loud.py <<'PY'
import os, signal
signal.signal(signal.SIGTTOU, signal.SIG_DFL)
signal.signal(signal.SIGTTIN, signal.SIG_DFL)
os.write(1, b"loud\n")
PY
# script(1) gives fanwatch a terminal; tostop is set on it first.
script -qec "stty tostop; $TOOL -q --settle 50 --exec 'echo printed-\$#; python3 loud.py; echo done >> runs' d" /dev/null < /dev/null > out 2>&1 &
WPID=$!
wait_for done runs || fail "run 1 did not complete: $(cat runs 2>/dev/null)"
: > d/a
i=0; while [ "$(grep -c done runs)" -lt 2 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
[ "$(grep -c done runs)" = 2 ] || fail "$(grep -c done runs) of 2 runs complete"
grep -q printed-0 out && grep -q printed-1 out && [ "$(grep -c loud out)" = 2 ] ||
	fail "the output did not reach the terminal"
stop_watch
# The terminal closes while a run runs.
script -qec "$TOOL -q --settle 50 --exec 'echo \$\$ > pid; exec sleep 60' d" /dev/null < /dev/null > out 2>&1 &
WPID=$!
wait_for . pid || fail "no run"
pid=$(cat pid)
kill "$WPID"; wait "$WPID" 2>/dev/null; WPID=
i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
kill -0 "$pid" 2>/dev/null && { kill "$pid"; fail "the command outlived the terminal"; }
exit 0
