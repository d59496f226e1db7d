#!/bin/sh
# vm/expected-cases: an expected case that never ran FAILs, a case absent by
# design SKIPs with its reason, one listed absent that ran FAILs, a "pass"
# case that skipped FAILs, and a suite with lists but none for this leg FAILs.
set -u
vm=$(cd "$(dirname "$0")/../../vm" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
check() { # NAME WANT GOT
	if [ "$2" = "$3" ]; then
		pass=$((pass + 1))
		echo "ok - $1"
	else
		fail=$((fail + 1))
		echo "not ok - $1"
		printf '%s\n' "--- want" "$2" "--- got" "$3" | sed 's/^/#   /'
	fi
}

mkdir "$tmp/lists"
cat >"$tmp/lists/test-6.1-arm64.txt" <<'L'
# a comment
uffd-anon stress-bounces-0
uffd-anon uffd-wp_with_pagemap_pgsize_4096 - arm64 has uffd-wp only from 6.10
uffd-shmem minor_faults
host.x feature pass
host.x other pass
fanotify-unpriv gone - by design
L
cat >"$tmp/results" <<'R'
K513-RESULT uffd-anon stress-bounces-0 PASS
K513-RESULT host.x feature SKIP kernel lacks it
K513-RESULT host.x other PASS
K513-RESULT fanotify-unpriv gone PASS
R
got=$(K513_EXPECTED_DIR=$tmp/lists K513_ARCH=arm64 K513_KERNEL=6.1 \
	"$vm/expected-cases" --suite test --results "$tmp/results" 2>&1)
check "one line per case that is absent or wrong" "K513-RESULT uffd-anon uffd-wp_with_pagemap_pgsize_4096 SKIP absent by design on arm64 6.1: arm64 has uffd-wp only from 6.10
K513-RESULT uffd-shmem minor_faults FAIL expected on arm64 6.1 ($tmp/lists/test-6.1-arm64.txt), but it never ran
K513-RESULT host.x feature-required FAIL skipped, but arm64 6.1 has what it needs ($tmp/lists/test-6.1-arm64.txt)
K513-RESULT fanotify-unpriv gone FAIL listed as absent by design on arm64 6.1 in $tmp/lists/test-6.1-arm64.txt, but it ran: update the list" "$got"

got=$(K513_EXPECTED_DIR=$tmp/lists K513_ARCH=x86_64 K513_KERNEL=6.12 \
	"$vm/expected-cases" --suite test --results "$tmp/results" 2>&1)
case $got in
"K513-RESULT expected-cases list FAIL no "*"test-6.12-x86_64.txt for x86_64 6.12:"*) r=yes ;;
*) r=$got ;;
esac
check "a leg without a list fails" yes "$r"

got=$(K513_EXPECTED_DIR=$tmp/lists K513_ARCH=x86_64 K513_KERNEL=6.1 \
	"$vm/expected-cases" --suite kfence --results "$tmp/results" 2>&1)
check "a suite without lists is not checked" "" "$got"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
