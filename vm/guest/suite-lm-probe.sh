# shellcheck shell=sh
# Where does minor mode's switch-over time go in this guest?  The point
# where SWITCH's transit was worst (64 MiB, 1% stale, 1 Gbit/s, 100 us RTT),
# in variants, interleaved, LM_PROBE_RUNS (5) runs each: the default (drain
# before the pause), --no-drain, the kernel's socket buffer autotuning
# (LM_SOCKBUF=0) and a destination that spins for SWITCH (LM_SPIN_MS=50);
# each run's downtime split (pause->SWITCH sent, in transit,
# received->resume).  The first run of each has ftrace's scheduler, IRQ and
# network events on, lm writing its own steps to trace_marker (LM_TRACE),
# and prints the trace from "SWITCH send" to "resumed".  Not a test: a
# measurement.
# vm/run-guest --suite lm-probe --meson-build build
# shellcheck source=vm/guest/lib.sh
. /lib/k513/lib.sh

T=/sys/kernel/debug/tracing
# LM_PROBE_POINT from the kernel command line has commas for spaces
# (run-guest --append LM_PROBE_POINT=--size,512M,--stale,0.3,--bandwidth,10G).
POINT=$(echo "${LM_PROBE_POINT:-"--size 64M --stale 0.01 --bandwidth 1G --rtt 100us"}" | tr , ' ')
ARGS="--mode minor $POINT --precopy 0.5 --after 0.3 --verify --json"

# probe_run LABEL TRACE ENV ARGS...: one run (ENV: VAR=VALUE for it, or -);
# its downtime split as a K513-PROBE line
probe_run() {
	label=$1 trace=$2 penv=$3
	shift 3
	[ "$penv" = - ] && penv=K513_PROBE=1
	if [ "$trace" = 1 ] && [ -d $T ]; then
		echo 0 >$T/tracing_on
		: >$T/trace
		echo 1 >$T/tracing_on
		export LM_TRACE=$T/trace_marker
	fi
	# shellcheck disable=SC2086 # word splitting of ARGS is wanted
	env "$penv" lm run $ARGS "$@" >/tmp/probe-json 2>/tmp/probe-err </dev/null
	rc=$?
	unset LM_TRACE
	[ -d $T ] && echo 0 >$T/tracing_on
	sed -n 's/.*"downtime_ms":\([0-9.]*\),"src_pause_to_switch_ms":\([0-9.]*\),"dst_switch_to_resume_ms":\([0-9.]*\),"switch_transit_ms":\([0-9.-]*\),"drain_ms":\([0-9.]*\).*"verify":\([a-z]*\).*/\1 \2 \4 \3 \5/p' \
		/tmp/probe-json | {
		read -r dt pause transit resume drain || true
		echo "K513-PROBE $label rc=$rc downtime=$dt pause_to_sent=$pause transit=$transit received_to_resume=$resume drain=$drain"
	}
	[ "$rc" -eq 0 ] || sed "s/^/K513-PROBE $label | /" /tmp/probe-err
	if [ "$trace" = 1 ] && [ -d $T ]; then
		# from the pause to 3 ms after the resume: who ran meanwhile
		awk 'function ts(l,   a, b, n) { split(l, a, ": "); n = split(a[1], b, " "); return b[n] + 0 }
			/lm src: pause$/ { keep = 1 }
			keep && end && ts($0) > end { exit }
			keep { print }
			keep && /lm dst: resumed/ { end = ts($0) + 0.003 }' \
			$T/trace | head -n 900 | sed "s/^/K513-TRACE $label /"
	fi
}

if [ -d $T ]; then
	echo 8192 >$T/buffer_size_kb
	for ev in sched/sched_wakeup sched/sched_switch sched/sched_waking sched/sched_migrate_task \
		irq/softirq_entry irq/softirq_exit irq/irq_handler_entry irq_vectors/reschedule_entry \
		irq_vectors/call_function_single_entry irq_vectors/call_function_entry \
		irq_vectors/local_timer_entry net/netif_rx net/net_dev_xmit net/netif_receive_skb \
		sock/sock_exceed_buf_limit sock/sock_rcvqueue_full skb/kfree_skb skb/consume_skb \
		tcp/tcp_probe tcp/tcp_retransmit_skb tlb/tlb_flush timer/hrtimer_expire_entry \
		timer/timer_expire_entry workqueue/workqueue_execute_start; do
		[ -e "$T/events/$ev/enable" ] && echo 1 >"$T/events/$ev/enable"
	done
fi
echo "K513-PROBE point: $POINT; load: $(cat /proc/loadavg)"
i=0
while [ "$i" -lt "${LM_PROBE_RUNS:-5}" ]; do
	i=$((i + 1))
	t=0
	# LM_PROBE_TRACE_ALL=1: every run traced, to catch the slow ones
	[ "$i" = 1 ] || [ "${LM_PROBE_TRACE_ALL:-0}" = 1 ] && t=1
	probe_run "drain-$i" $t -
	[ "${LM_PROBE_VARIANTS:-1}" = 0 ] && continue
	probe_run "nodrain-$i" 0 - --no-drain
	probe_run "autotune-$i" 0 LM_SOCKBUF=0
	probe_run "spin-$i" 0 LM_SPIN_MS=50
done
echo "K513-RESULT lm-probe runs PASS"
finish
