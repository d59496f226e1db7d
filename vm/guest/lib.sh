# shellcheck shell=sh
# Helpers for the guest suites (busybox sh).

RESULTS=/tmp/k513-results
: >"$RESULTS"

# run_case GROUP FMT STRICT TIMEOUT CMD...: run one test program, keep its
# whole output in the serial log, and turn it into K513-RESULT lines.
run_case() {
	group=$1 fmt=$2 strict=$3 limit=$4
	shift 4
	out=/tmp/out.$group
	echo "K513-BEGIN $group"
	start=$(date +%s)
	timeout "$limit" "$@" >"$out" 2>&1 </dev/null
	rc=$?
	[ "$rc" -eq 143 ] && echo "timed out after $limit s" >>"$out"
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

finish() {
	pass=$(grep -c ' PASS' "$RESULTS")
	fail=$(grep -c ' FAIL' "$RESULTS")
	skip=$(grep -c ' SKIP' "$RESULTS")
	echo "K513-DONE pass=$pass fail=$fail skip=$skip"
}
