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
expect "build-kernel: unknown variant" "unknown kernel variant 'nosuch': choose one of: kasan" \
	"$vm/build-kernel" --variant nosuch
expect "build-kernel: variant that is a path" "unknown kernel variant '../config'" \
	"$vm/build-kernel" --variant ../config
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
[ ! -e "$tmp/x.cpio.gz" ] || { fail=$((fail + 1)); echo "not ok - a refused run left an initramfs"; }

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
