#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Each src/ file depends only downward (issue 31): the calls between the
# library's objects, read from the static library's symbols, form no
# cycle.  tsort(1) fails on one and names it.  $1: libuffdminor.a
set -eu
nm "$1" | awk '
/:$/ { obj = $1; sub(/:$/, "", obj); next }
NF == 3 && $2 ~ /^[TDBRV]$/ { def[$3] = obj; next }
NF == 2 && $1 == "U" { n++; user[n] = obj; sym[n] = $2 }
END {
	for (i = 1; i <= n; i++)
		if ((sym[i] in def) && def[sym[i]] != user[i])
			print user[i], def[sym[i]]
}' | sort -u > "${TMPDIR:-/tmp}/uffdm-layers.$$"
pairs="${TMPDIR:-/tmp}/uffdm-layers.$$"
trap 'rm -f "$pairs"' EXIT
if ! tsort "$pairs" > /dev/null 2>&1; then
	echo "a cycle between the library's files (tsort names its members):"
	tsort "$pairs" 2>&1 >/dev/null | sed 's/^/  /'
	exit 1
fi
echo "no cycle among $(cut -d' ' -f1 "$pairs" | sort -u | wc -l) files that call others"
