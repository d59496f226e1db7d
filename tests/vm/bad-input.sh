#!/bin/sh
# The vm/ scripts refuse bad input with one clear message and a non-zero exit,
# before doing any work (these cases need no kernel tree and install nothing).
set -u
vm=$(cd "$(dirname "$0")/../../vm" && pwd)
pass=0
fail=0

# expect NAME PATTERN CMD...: CMD must fail and print PATTERN on stderr.
expect() {
	name=$1 pattern=$2
	shift 2
	err=$("$@" 2>&1 >/dev/null)
	rc=$?
	if [ "$rc" -ne 0 ] && printf '%s\n' "$err" | grep -q -- "$pattern"; then
		pass=$((pass + 1))
		echo "ok - $name"
	else
		fail=$((fail + 1))
		echo "not ok - $name (exit $rc)"
		printf '%s\n' "$err" | sed 's/^/#   /'
	fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect "build-kernel: unknown tree" "unknown kernel tree '5.4'" \
	"$vm/build-kernel" --kernel 5.4
expect "build-kernel: unknown option" "unknown option '--frobnicate'" \
	"$vm/build-kernel" --frobnicate
expect "build-kernel: unknown variant" "unknown kernel variant 'nosuch': choose one of: kasan slab" \
	"$vm/build-kernel" --variant nosuch
expect "build-kernel: variant that is a path" "unknown kernel variant '../config'" \
	"$vm/build-kernel" --variant ../config
expect "build-kernel: unknown architecture" "unknown architecture 'mips': choose one of: x86_64 arm64" \
	"$vm/build-kernel" --arch mips
expect "build-kernel: SLAB on 6.12" "the kernel variant 'slab' exists only for the trees 6.1, not 6.12" \
	"$vm/build-kernel" --kernel 6.12 --variant slab
expect "run-guest: unknown architecture" "unknown architecture 'riscv64'" \
	"$vm/run-guest" --arch riscv64
expect "run-guest: SLAB on 6.12" "exists only for the trees 6.1, not 6.12" \
	"$vm/run-guest" --kernel 6.12 --variant slab
expect "run-all: unknown architecture" "unknown architecture 'mips'" \
	"$vm/../tests/run-all" --arch mips --list
expect "run-all: unknown leg" "unknown leg 'foo'" \
	"$vm/../tests/run-all" --matrix host,foo --list
expect "run-all: SLAB leg on 6.12" "exists only for the trees 6.1, not 6.12" \
	"$vm/../tests/run-all" --matrix x86_64-6.12-slab --list
expect "run-all: unknown tree in a leg" "unknown kernel tree '5.4'" \
	"$vm/../tests/run-all" --matrix arm64-5.4 --list
expect "demo: unknown architecture" "unknown architecture 'mips'" \
	"$vm/demo" --arch mips
expect "run-guest: unknown variant" "unknown kernel variant 'nosuch'" \
	"$vm/run-guest" --variant nosuch
expect "run-guest: unknown suite" "no guest suite 'nosuch'" \
	"$vm/run-guest" --suite nosuch
expect "run-guest: non-numeric timeout" "take whole numbers" \
	"$vm/run-guest" --timeout soon
expect "build-initramfs: kernel dir not built" "is not a complete kernel build" \
	"$vm/build-initramfs" --kernel-dir "$tmp" --out "$tmp/x.cpio.gz"
expect "build-initramfs: missing arguments" "are required" \
	"$vm/build-initramfs" --out "$tmp/x.cpio.gz"
expect "build-modules: kernel dir not built" "is not a complete kernel build" \
	"$vm/build-modules" --kernel-dir "$tmp" --out "$tmp/m"
# A kernel build directory of each architecture, enough for build-initramfs
# to reach its checks: an x86_64 program must not go into an arm64 guest.
mkdir -p "$tmp/k/build" "$tmp/k/selftests"
touch "$tmp/k/.complete"
echo CONFIG_ARM64=y >"$tmp/k/config"
if [ -e "${K513_CACHE:-$HOME/.cache/k513}/sysroot/arm64/.complete" ]; then
	expect "build-initramfs: a host program into the arm64 guest" \
		"is built for 'Advanced Micro Devices X86-64', but the guest is arm64" \
		"$vm/build-initramfs" --kernel-dir "$tmp/k" --extra /bin/sh --out "$tmp/x.cpio.gz"
else
	echo "ok - build-initramfs: a host program into the arm64 guest # SKIP no arm64 sysroot yet (vm/build-initramfs fetches it)"
fi
[ ! -e "$tmp/x.cpio.gz" ] || { fail=$((fail + 1)); echo "not ok - a refused run left an initramfs"; }

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
