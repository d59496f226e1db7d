# shellcheck shell=sh
# libuffdminor's benchmark on the guest kernel, where the huge-page pool
# exists: library handler vs raw ioctls vs MISSING+COPY, 4 KiB shmem and
# 2 MiB hugetlb, 1/2/4 handler threads. Sized for TCG.
# shellcheck source=vm/guest/lib.sh
. /lib/k513/lib.sh
echo "K513-BENCH begin uffdm-bench"
uffdm-bench -n 4096 -H 32 -r 3 2>&1 | sed 's/^/K513-BENCH /'
echo "K513-BENCH end"
finish
