# shellcheck shell=sh
# Helpers for the guest suites (busybox sh).

RESULTS=/tmp/k513-results
: >"$RESULTS"

# watched LIMIT OUT ERR CMD...: run CMD with stdout in OUT and stderr in ERR
# (they may be the same file), and stop it only when neither has grown for
# LIMIT seconds.  A slow run on a busy machine is never cut short, a hung
# one is.  Every minute of a quiet run a K513-ALIVE line goes to the
# console, so the host's watchdog (which wants the serial log to grow) sees
# a live guest.  Sets watched_rc to CMD's exit status (143 when stopped).
watched() {
	limit=$1 wout=$2 werr=$3
	shift 3
	rm -f /tmp/watched.rc /tmp/watched.pid
	{
		if [ "$wout" = "$werr" ]; then
			"$@" >"$wout" 2>&1 </dev/null &
		else
			"$@" >"$wout" 2>"$werr" </dev/null &
		fi
		echo "$!" >/tmp/watched.pid
		wait "$!"
		echo "$?" >/tmp/watched.rc
	} &
	last=-1 idle=0 ran=0
	while [ ! -f /tmp/watched.rc ]; do
		sleep 1
		ran=$((ran + 1))
		size=$(cat "$wout" "$werr" 2>/dev/null | wc -c)
		if [ "$size" -ne "$last" ]; then
			last=$size idle=0
		else
			idle=$((idle + 1))
		fi
		[ $((ran % 60)) -ne 0 ] || echo "K513-ALIVE ${ran}s: $1"
		if [ "$idle" -ge "$limit" ] && [ -f /tmp/watched.pid ]; then
			pid=$(cat /tmp/watched.pid)
			echo "watched: no output for $idle s: stopping $*" >>"$werr"
			pkill -TERM -P "$pid" 2>/dev/null
			kill -TERM "$pid" 2>/dev/null
			idle=0
		fi
	done
	wait
	watched_rc=$(cat /tmp/watched.rc)
}

# run_case GROUP FMT STRICT LIMIT CMD...: run one test program, stopped only
# after LIMIT seconds without output; keep its whole output in the serial
# log, and turn it into K513-RESULT lines.
run_case() {
	group=$1 fmt=$2 strict=$3 limit=$4
	shift 4
	out=/tmp/out.$group
	echo "K513-BEGIN $group"
	start=$(date +%s)
	watched "$limit" "$out" "$out" "$@"
	rc=$watched_rc
	[ "$rc" -eq 143 ] && echo "stopped: no output for $limit s" >>"$out"
	sed 's/^/  | /' "$out"
	awk -v group="$group" -v fmt="$fmt" -v rc="$rc" -v strict="$strict" \
		-f /lib/k513/results.awk "$out" | tee -a "$RESULTS"
	echo "K513-END $group rc=$rc seconds=$(($(date +%s) - start))"
}

# run_in DIR GROUP ...: run_case in DIR; a missing DIR is a failure of its
# own, never a silently skipped test.
run_in() {
	dir=$1
	shift
	if cd "$dir"; then
		run_case "$@"
		cd /
	else
		echo "K513-RESULT $1 workdir FAIL cannot enter $dir" | tee -a "$RESULTS"
	fi
}

# check_extras: every --extra program is in the guest at its promised path
# and runs (a FAIL names a missing one rather than a suite failing later).
check_extras() {
	[ -f /lib/k513/extras ] || return 0
	while IFS= read -r x; do
		if [ -x "$x" ]; then
			echo "K513-RESULT extra $(basename "$x") PASS"
		else
			echo "K513-RESULT extra $(basename "$x") FAIL --extra $x is not in the guest"
		fi
	done </lib/k513/extras | tee -a "$RESULTS"
}

finish() {
	check_extras
	pass=$(grep -c ' PASS' "$RESULTS")
	fail=$(grep -c ' FAIL' "$RESULTS")
	skip=$(grep -c ' SKIP' "$RESULTS")
	echo "K513-DONE pass=$pass fail=$fail skip=$skip"
}
