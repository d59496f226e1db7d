#!/bin/sh
# The guest turns every test program's output into K513-RESULT lines with
# vm/guest/results.awk; check it on captured outputs of each format, under
# busybox awk (what the guest runs). The project step installs busybox-static;
# only a build outside it (a package build's chroot) falls back to awk.
set -u
here=$(cd "$(dirname "$0")" && pwd)
awkprog=$here/../../vm/guest/results.awk
fix=$here/fixtures
if command -v busybox >/dev/null 2>&1; then
	AWK="busybox awk"
else
	AWK="awk"
	echo "# busybox is not installed: checking with $(command -v awk), not the guest's busybox awk"
fi

pass=0
fail=0
# fixture group fmt rc strict
check() {
	got=$($AWK -v group="$2" -v fmt="$3" -v rc="$4" -v strict="$5" -f "$awkprog" "$fix/$1".*[gt])
	if [ "$got" = "$(cat "$fix/$1.expected")" ]; then
		pass=$((pass + 1))
		echo "ok - $1"
	else
		fail=$((fail + 1))
		echo "not ok - $1"
		printf '%s\n' "$got" | diff -u "$fix/$1.expected" - | sed 's/^/#   /'
	fi
}

check kunit-dmesg kfence tap 0 1
check kselftest fanotify tap 1 0
check cmocka host.cm tap 1 0
check uffd-fail uffd uffd 1 0
check crash prog tap 139 0
check uffd-unit uffd-unit uffd-unit 139 0

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
