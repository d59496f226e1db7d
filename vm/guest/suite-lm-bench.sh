# shellcheck shell=sh
# The live-migration sweep on the guest kernel: memory size x stale fraction
# x link rate, each point migrated in all three modes with --verify.
# 2 GiB of guest RAM holds a 512 MiB source and its destination.  Five
# runs per point (min/median/max), the modes interleaved: about an hour.
# vm/run-guest --suite lm-bench --meson-build build
# shellcheck source=vm/guest/lib.sh
. /lib/k513/lib.sh

# bench NAME ARGS...: one lm-bench run; its verdict (every page verified
# in every run) is a result.
bench() {
	name=$1
	shift
	echo "K513-BENCH begin lm-bench $*"
	# each row as it comes: a point can take a minute under TCG
	{
		lm-bench "$@" </dev/null 2>&1
		echo "$?" >/tmp/lm-bench.rc
	} | sed 's/^/K513-BENCH /'
	rc=$(cat /tmp/lm-bench.rc)
	echo "K513-BENCH end"
	if [ "$rc" -eq 0 ]; then
		echo "K513-RESULT lm-bench $name PASS"
	else
		echo "K513-RESULT lm-bench $name FAIL lm-bench exited with status $rc"
	fi | tee -a "$RESULTS"
}

track() {
	lm run --backing "$1" --size 4M --precopy 0.1 --after 0.1 2>&1 >/dev/null |
		sed -n 's/.*tracking \([a-z-]*\).*/\1/p' | head -n 1
}

echo "K513-BENCH kernel $(uname -r); dirty tracking: shmem $(track shmem), hugetlb $(track hugetlb)"
# A shorter sweep for a busy machine: LM_BENCH_RUNS, LM_BENCH_LINKS and
# LM_BENCH_HUGETLB=0 on the kernel command line (run-guest --append) reach
# this script as environment variables.
runs=${LM_BENCH_RUNS:-5}
bench shmem --sizes 64M,256M,512M --stale 0.01,0.1,0.3 --bandwidth "${LM_BENCH_LINKS:-1G,10G}" \
	--precopy 0.5 --after 0.3 --runs "$runs"
# 192 huge pages: a 128 MiB source and its destination take 128.
[ "${LM_BENCH_HUGETLB:-1}" = 0 ] ||
	bench hugetlb --backing hugetlb --sizes 64M,128M --stale 0.1 --bandwidth 1G --precopy 0.5 \
		--after 0.3 --runs "$runs"
finish
