# shellcheck shell=sh
# Two guests, one migration: vm/run-guest --pair boots this kernel twice,
# joined by a virtual network, k513.role=src (10.13.0.1) and dst
# (10.13.0.2).  The same workload as the demo moves from one to the other
# in each mode, every page verified: three runs each for vm/demo's medians,
# k513.pair_runs=N on the kernel command line for another count
# (tests/run-all asks for one: the runs prove the same path).  The machines share
# no clock: the destination's report adds half a measured round trip for
# SWITCH's time on the wire (lm(1), "Downtime").
# shellcheck source=vm/guest/lib.sh
. /lib/k513/lib.sh
# shellcheck source=vm/guest/lm-watch.sh
. /lib/k513/lm-watch.sh

LM=/opt/k513/bin/lm
KEY=/etc/k513/lm.key
ARGS="--size 64M --threads 2 --stale 0.1 --bandwidth 1G --rounds 3 --precopy 1 --after 1 --verify"
MODES="minor stop-copy postcopy-missing"
RUNS=3

role='' ip='' peer=''
read -r cmdline </proc/cmdline
for arg in $cmdline; do
	case $arg in
	k513.role=*) role=${arg#*=} ;;
	k513.ip=*) ip=${arg#*=} ;;
	k513.peer=*) peer=${arg#*=} ;;
	k513.pair_runs=*) RUNS=${arg#*=} ;;
	esac
done

result() {
	echo "K513-RESULT pair-$role $*" | tee -a "$RESULTS"
}

# The link: eth0 up with our address, and the peer answering.
link() {
	if [ -z "$role" ] || [ -z "$ip" ] || [ -z "$peer" ]; then
		result link FAIL "no k513.role/ip/peer on the command line (boot with vm/run-guest --pair)"
		return 1
	fi
	if ! ip link set eth0 up || ! ip addr add "$ip/24" dev eth0; then
		result link FAIL "no eth0: the kernel lacks virtio-net or QEMU gave no NIC"
		return 1
	fi
	n=0
	until ping -c 1 -W 1 "$peer" >/dev/null 2>&1; do
		n=$((n + 1))
		if [ "$n" -ge 120 ]; then
			result link FAIL "$peer did not answer for 120 s"
			return 1
		fi
	done
	result link PASS
}

# dst: one lm dest per run, each on its own port, so a source early for the
# next run is refused by the kernel (and retries) rather than by the door.
dst_run() {
	# shellcheck disable=SC2086 # word splitting of ARGS is wanted
	lm_watched /tmp/pair-row /tmp/pair-err $LM dest --key "$KEY" --listen "0.0.0.0:$1" \
		--mode "$2" $ARGS --row
}

# src: connect once the destination listens (it may still be setting up).
src_run() {
	n=0
	while :; do
		# shellcheck disable=SC2086 # word splitting of ARGS is wanted
		lm_watched /tmp/pair-row /tmp/pair-err $LM source --key "$KEY" --to "$peer:$1" \
			--mode "$2" $ARGS
		grep -q "cannot connect" /tmp/pair-err || return 0
		n=$((n + 1))
		[ "$n" -lt 300 ] || return 0
		sleep 1
	done
}

case $RUNS in
''|*[!0-9]*|0) result runs FAIL "k513.pair_runs=$RUNS: want a count of runs, 1 or more"; RUNS=0 ;;
esac

if [ "$RUNS" -gt 0 ] && link; then
	: >/tmp/pair-rows
	port=4513
	for mode in $MODES; do
		run=1
		while [ "$run" -le "$RUNS" ]; do
			echo "K513-BEGIN pair-$role $mode $run"
			"${role}_run" "$port" "$mode"
			rc=$lm_rc
			sed 's/^/  | /' /tmp/pair-err /tmp/pair-row
			if [ "$rc" -eq 0 ]; then
				result "$mode-$run" PASS
				[ "$role" = src ] || cat /tmp/pair-row >>/tmp/pair-rows
			else
				result "$mode-$run" FAIL "exit status $rc"
			fi
			echo "K513-END pair-$role $mode $run rc=$rc"
			port=$((port + 1))
			run=$((run + 1))
		done
	done
	if [ "$role" = dst ]; then
		echo "K513-DEMO two guests (a virtual network; no shared clock: downtime adds half a measured round trip):"
		$LM row-header | while IFS= read -r line; do echo "K513-DEMO $line"; done
		while IFS= read -r line; do echo "K513-DEMO $line"; done </tmp/pair-rows
		# the median of each mode's runs, and the ratios against minor
		awk '{ d[$1] = d[$1] " " $3 }
		function median(s,   a, n, i, j, t) {
			n = split(s, a, " ")
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
				if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
			return n ? a[int((n + 1) / 2)] : 0
		}
		END {
			m = median(d["minor"]); s = median(d["stop-copy"]); p = median(d["postcopy-missing"])
			printf "K513-DEMO two guests, median downtime: minor %.2f ms, stop-copy %.2f ms, postcopy-missing %.2f ms", m, s, p
			if (m > 0) printf " (%.1fx, %.1fx)", s / m, p / m
			printf "\n"
		}' /tmp/pair-rows
	fi
fi
finish
