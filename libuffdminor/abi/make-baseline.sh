#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Regenerate a stored ABI baseline: build libuffdminor at git revision REV
# in a scratch directory and write its abidw XML (public header types only,
# no paths) to OUT.  How the stored ones were made (no tags: 0.2 is the
# last revision before the 0.3 version bump bd4389f, 0.3 the main branch
# when 0.4's work began):
#   libuffdminor/abi/make-baseline.sh 6f394f8 libuffdminor/abi/libuffdminor-0.1.abi
#   libuffdminor/abi/make-baseline.sh 71bc01a libuffdminor/abi/libuffdminor-0.2.abi
#   libuffdminor/abi/make-baseline.sh 63e2a81 libuffdminor/abi/libuffdminor-0.3.abi
# A new release adds its file and its name to uffdm_releases in
# libuffdminor/meson.build: each release is checked against the one before.
# Needs git, meson, ninja and abigail-tools (abidw).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 REV OUT" >&2; exit 2; }
rev=$1 out=$2
top=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$top" archive "$rev" | tar -x -C "$tmp"
meson setup "$tmp/b" "$tmp" -Dbuildtype=debugoptimized >/dev/null
lib=$(cd "$tmp/b" && meson introspect --targets |
	jq -r '.[] | select(.name == "uffdminor" and .type == "shared library") | .filename[0]')
ninja -C "$tmp/b" "${lib#"$tmp/b/"}" >/dev/null
abidw --headers-dir "$tmp/libuffdminor/include" --drop-private-types --no-corpus-path \
	--no-show-locs --no-comp-dir-path --out-file "$out" "$lib"
echo "wrote $out from $rev ($lib)"
