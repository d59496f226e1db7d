# shellcheck shell=sh
# KFENCE alone, for kernel variants (run-guest --variant kasan --suite
# kfence): the tree's KFENCE KUnit suite, the drill module read back by
# kfence-report, and -- on a KASAN kernel -- proof that KASAN is on and
# reported nothing while KFENCE caught every bug the drill committed.
# shellcheck source=vm/guest/lib.sh
. /lib/k513/lib.sh

# KUnit ran before /init; every case must have run (strict: a skip fails).
dmesg >/tmp/dmesg.txt
run_case kfence tap 1 10 cat /tmp/dmesg.txt

# shellcheck source=vm/guest/test.d/30-kfence.sh
. /lib/k513/test.d/30-kfence.sh

# kasan_check: one K513-RESULT per claim about KASAN on this kernel. KFENCE's
# objects are KFENCE's, so the drill's bugs must never reach KASAN; that
# holds (trivially) without KASAN too, so it is checked on every kernel, and
# a kasan variant must also prove that KASAN is on.
kasan_check() {
	dmesg >/tmp/dmesg.txt
	n=$(grep -c 'BUG: KASAN' /tmp/dmesg.txt)
	if [ "$n" -eq 0 ]; then
		echo "K513-RESULT kasan no-reports PASS"
	else
		echo "K513-RESULT kasan no-reports FAIL $n KASAN reports; first: $(grep -m1 'BUG: KASAN' /tmp/dmesg.txt)"
	fi
	# init sets $variant from k513.variant= on the kernel command line.
	[ "${variant:-}" = kasan ] || return 0
	if grep -q 'KernelAddressSanitizer initialized' /tmp/dmesg.txt; then
		echo "K513-RESULT kasan enabled PASS"
	else
		echo "K513-RESULT kasan enabled FAIL the kernel did not print 'KernelAddressSanitizer initialized'"
	fi
}

kasan_check | tee -a "$RESULTS"
finish
