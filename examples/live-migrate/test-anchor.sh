#!/bin/sh
# lm-qemu-anchor without QEMU: bad input is refused with one clear message
# and exit 1 before any work; the pause is computed right from recorded QMP
# transcripts (anchor-data/: two 64 MiB runs kept with --keep, QEMU 7.2,
# less the polls made while the migration was active), and a
# transcript that lacks an event is an error, not a number; the guest image
# is a flat multiboot image.
#
#   test-anchor.sh LM-QEMU-ANCHOR DATA-DIR [lm-dirty.bin]
set -u
anchor=$1 data=$2 guest=${3:-}
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok - $1"; }
not_ok() {
	fail=$((fail + 1))
	echo "not ok - $1"
	printf '%s\n' "$2" | sed 's/^/#   /'
}

# expect NAME PATTERN ARGS...: exit 1, PATTERN in a one-line stderr.
expect() {
	name=$1 pattern=$2
	shift 2
	err=$("$anchor" "$@" 2>&1 >/dev/null)
	rc=$?
	if [ "$rc" -eq 1 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] &&
		printf '%s\n' "$err" | grep -q -- "$pattern"; then
		ok "$name"
	else
		not_ok "$name (exit $rc)" "$err"
	fi
}

# prints NAME PATTERN ARGS...: exit 0 and PATTERN on stdout.
prints() {
	name=$1 pattern=$2
	shift 2
	out=$("$anchor" "$@" 2>&1)
	rc=$?
	if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -qF -- "$pattern"; then
		ok "$name"
	else
		not_ok "$name (exit $rc)" "$out"
	fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

prints "--help" "comparison of kinds" --help
expect "unknown mode" "unknown mode 'warp' in --modes; known: precopy" --modes precopy,warp
expect "no mode" "names no mode" --modes ,
expect "missing QEMU" "QEMU not found: '$tmp/qemu'" --qemu "$tmp/qemu" --modes postcopy-ram
expect "missing lm" "lm not found" --lm "$tmp/lm" --modes minor
expect "size too large" "whole MiB from 16M to 2G" --sizes 64M,4G
expect "size not a size" "'lots' is not a size" --sizes lots
expect "size not whole MiB" "whole MiB" --sizes 64.5M
expect "stale zero" "must be in (0, 1]" --stale 0
expect "stale NaN" "must be in (0, 1]" --stale nan
expect "runs" "--runs must be in 1..20" --runs 0
expect "sockbuf" "--sockbuf needs a size" --sockbuf big
expect "precopy seconds" "--precopy must be seconds" --precopy -1
expect "unknown option" "unrecognized arguments" --frobnicate

# The recorded postcopy run: STOP and RESUME stamped by one clock, QEMU's
# own field beside it, and the destination's blocktime.
prints "postcopy transcript" "$(cat "$data/postcopy.expected")" \
	--transcripts "$data/postcopy-src.jsonl" "$data/postcopy-dst.jsonl"
prints "precopy transcript" "$(cat "$data/precopy.expected")" \
	--transcripts "$data/precopy-src.jsonl" "$data/precopy-dst.jsonl"
grep -v '"RESUME"' "$data/postcopy-dst.jsonl" >"$tmp/no-resume.jsonl"
err=$("$anchor" --transcripts "$data/postcopy-src.jsonl" "$tmp/no-resume.jsonl" 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && printf '%s\n' "$err" | grep -q "no RESUME event"; then
	ok "transcript without RESUME"
else
	not_ok "transcript without RESUME (exit $rc)" "$err"
fi
expect "transcript not JSON" "cannot read the transcript" \
	--transcripts "$0" "$data/postcopy-dst.jsonl"

printf 'not an image\n' >"$tmp/junk.bin"
expect "guest not multiboot" "not a multiboot image" --check-guest --guest "$tmp/junk.bin"
if [ -n "$guest" ]; then
	prints "guest image" "a flat multiboot image" --check-guest --guest "$guest"
else
	echo "ok - guest image # SKIP not built: it needs a compiler that makes x86 code"
fi

echo "1..$((pass + fail))"
[ "$fail" -eq 0 ]
