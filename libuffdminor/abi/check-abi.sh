#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The built library against a stored ABI baseline, with abidiff: added
# symbols are fine (a new LIBUFFDMINOR_x node); a removed or changed
# function or variable of the baseline fails, and so does a changed
# public type it reaches (abidiff calls that "ABI change" and leaves the
# verdict to a human: for a released 0.1 symbol it is a break).
#   check-abi.sh BASELINE.abi LIB.so
# The baseline holds public types only (abidw --drop-private-types), so a
# private struct that the header keeps opaque may change freely.
set -u
[ $# -eq 2 ] || { echo "usage: $0 BASELINE.abi LIB.so" >&2; exit 2; }
if ! command -v abidiff >/dev/null; then
	echo "# skip reason: abidiff not installed (Debian: apt-get install abigail-tools)"
	exit 77
fi
out=$(abidiff "$1" "$2")
rc=$?
printf '%s\n' "$out"
# abidiff's exit: bit 0 error, 1 usage, 2 ABI changed, 3 incompatible
if [ $((rc & 3)) -ne 0 ]; then
	echo "FAIL: abidiff could not compare (exit $rc)"
	exit 1
fi
bad=$(printf '%s\n' "$out" | sed -n \
	's/^\(Functions\|Variables\) changes summary: \([0-9]*\) Removed[^,]*, \([0-9]*\) Changed.*/\2 \3/p' |
	awk '{ n += $1 + $2 } END { print n + 0 }')
if [ $((rc & 8)) -ne 0 ] || [ "$bad" -ne 0 ]; then
	echo "FAIL: $bad removed or changed symbols of $1 (abidiff exit $rc)"
	exit 1
fi
echo "ok: every symbol of $1 is there, unchanged (abidiff exit $rc)"
