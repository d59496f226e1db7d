# shellcheck shell=sh
# Where does minor mode's switch-over time go in this guest?  Runs the
# point where SWITCH's transit was worst (64 MiB, 1% stale, 1 Gbit/s) with
# ftrace's scheduler, IRQ and network events on, lm writing its own steps
# to trace_marker (LM_TRACE), and prints the trace from "SWITCH send" to
# "SWITCH received" of each run.  Not a test: a measurement.
# vm/run-guest --suite lm-probe --meson-build build
# shellcheck source=vm/guest/lib.sh
. /lib/k513/lib.sh

T=/sys/kernel/debug/tracing
ARGS="--mode minor --size 64M --stale 0.01 --bandwidth 1G --rtt 100us --precopy 0.5 --after 0.3 --verify --row"

probe_run() {
	label=$1
	shift
	echo 0 >$T/tracing_on
	: >$T/trace
	echo 1 >$T/tracing_on
	LM_TRACE=$T/trace_marker "$@" lm run $ARGS >/tmp/probe-row 2>/tmp/probe-err </dev/null
	rc=$?
	echo 0 >$T/tracing_on
	row=$(cat /tmp/probe-row)
	echo "K513-PROBE $label rc=$rc row: $row"
	# the run's own split of the downtime
	grep -E 'SWITCH sent|in transit|resume' /tmp/probe-err | sed "s/^/K513-PROBE $label | /"
	awk '/lm src: ROUND/ { keep = 0 } /lm src: SWITCH send/ { keep = 1 } keep { print }
		/lm dst: resumed/ { keep = 0 }' $T/trace | head -n 400 | sed "s/^/K513-TRACE $label /"
}

if [ ! -d $T ]; then
	echo "K513-RESULT lm-probe tracefs SKIP no $T in this kernel"
	finish
	exit 0
fi
echo 8192 >$T/buffer_size_kb
for ev in sched/sched_wakeup sched/sched_switch sched/sched_waking sched/sched_migrate_task \
	irq/softirq_entry irq/softirq_exit irq_vectors/reschedule_entry \
	irq_vectors/call_function_single_entry net/netif_rx net/net_dev_xmit \
	timer/hrtimer_expire_entry; do
	[ -e "$T/events/$ev/enable" ] && echo 1 >"$T/events/$ev/enable"
done
echo "K513-PROBE events: $(cat $T/set_event | tr '\n' ' ')"
for i in 1 2 3; do
	probe_run "base-$i" env
done
echo "K513-RESULT lm-probe runs PASS"
finish
