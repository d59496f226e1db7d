# shellcheck shell=sh
# KFENCE measurements (vm/run-guest --suite kfence-bench --meson-build DIR):
# time to detection at sample intervals of 1, 10 and 100 ms (kfence-ttd),
# then the overhead of KFENCE on hackbench and a file-system workload
# (vm/guest/kfence-overhead.sh). Each prints its raw data as K513-TTD /
# K513-OVH lines in the serial log, which kfence-tools/bench/plot-ttd reads.
# Tunables on the kernel command line: k513.ttd_trials=N (0: no
# time-to-detection runs), k513.ovh_rounds=N.  Under vm/run-guest --icount
# the guest's clock counts instructions, so every time is repeatable.
# shellcheck source=vm/guest/lib.sh
. /lib/k513/lib.sh

ttd_trials=10 ovh_rounds=8
read -r cmdline </proc/cmdline
for arg in $cmdline; do
	case $arg in
	k513.ttd_trials=*) ttd_trials=${arg#*=} ;;
	k513.ovh_rounds=*) ovh_rounds=${arg#*=} ;;
	esac
done

if ! command -v kfence-ttd >/dev/null; then
	run_case kfence-bench tap 0 10 sh -c \
		'echo "kfence-ttd is not on PATH: run with --meson-build"; exit 4'
elif ! insmod /lib/k513/modules/kfence_drill.ko; then
	run_case kfence-bench tap 0 10 sh -c 'echo "Bail out! insmod kfence_drill failed"; exit 1'
else
	# whether hrtimers fire on their own or only at the tick matters to
	# how a timer-driven bug meets KFENCE's timer
	echo "K513-INFO $(grep -m1 -E 'hres_active' /proc/timer_list 2>/dev/null)"
	# A bug on a timer-driven path (the drill sleeps between firings) and
	# one on a busy path (it spins): KFENCE's gate opens from a timer too.
	# k513.ttd_trials=0: the overhead runs alone
	if [ "$ttd_trials" -gt 0 ]; then
		run_case kfence-ttd-sleep tap 0 3000 kfence-ttd -n "$ttd_trials" -i 1,10,100
		run_case kfence-ttd-spin tap 0 3000 kfence-ttd -s -n "$ttd_trials" -i 1,10,100
	fi
	if [ -f /lib/k513/kfence-overhead.sh ]; then
		run_case kfence-overhead tap 0 3000 sh /lib/k513/kfence-overhead.sh "$ovh_rounds"
	fi
	rmmod kfence_drill
fi
finish
