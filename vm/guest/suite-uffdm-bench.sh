# shellcheck shell=sh
# libuffdminor's benchmark on the guest kernel, where the huge-page pool
# exists: library handler vs raw ioctls vs MISSING+COPY, 4 KiB shmem and
# 2 MiB hugetlb, 1/2/4 handler threads. Sized for TCG; UFFDM_BENCH_REPS,
# UFFDM_BENCH_PAGES and UFFDM_BENCH_FAULTERS (run-guest --append) set the
# repetitions (default 3), the 4 KiB pages a run faults (default 4096) and
# the faulting-thread counts, comma-separated, one table each (default 4).
# shellcheck source=vm/guest/lib.sh
. /lib/k513/lib.sh
# clock_gettime is a system call unless the clocksource has a vDSO read
echo "K513-BENCH clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
echo "K513-BENCH begin uffdm-bench"
for f in $(echo "${UFFDM_BENCH_FAULTERS:-4}" | tr , " "); do
	uffdm-bench -n "${UFFDM_BENCH_PAGES:-4096}" -H 32 -r "${UFFDM_BENCH_REPS:-3}" -f "$f" 2>&1 |
		sed 's/^/K513-BENCH /'
done
echo "K513-BENCH end"
finish
