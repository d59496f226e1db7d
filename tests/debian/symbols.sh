#!/bin/sh
# libuffdminor0.symbols against the version map and the built library, in
# the host suite (the package build checks the same with dpkg-gensymbols):
#  - debian/symbols-from-map --check: the file is what the map makes;
#  - a map with one symbol more must fail that check;
#  - the library exports exactly the symbol@node pairs the file lists.
# usage: symbols.sh SRCDIR LIB.so
set -u
src=$1 lib=$2
map=$src/libuffdminor/libuffdminor.map
file=$src/debian/libuffdminor0.symbols
gen=$src/debian/symbols-from-map
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok - $1"; }
bad() { echo "not ok - $1"; fail=1; }

if "$gen" "$map" --check "$file" >"$tmp/out" 2>&1; then
	ok "the symbols file is the one the version map makes"
else
	bad "the symbols file and the version map differ"; sed 's/^/#   /' "$tmp/out"
fi

{ cat "$map"; printf 'LIBUFFDMINOR_9.9 {\n\tglobal:\n\t\tuffdm_planted;\n} LIBUFFDMINOR_0.2;\n'; } >"$tmp/map"
if "$gen" "$tmp/map" --check "$file" >/dev/null 2>&1; then
	bad "a symbol added to the map passed the check"
else
	ok "a symbol added to the map fails the check"
fi

if ! command -v nm >/dev/null; then
	echo "# skip: nm (binutils) is not installed"
	exit 77
fi
# nm: "T name@@NODE" (default), "T name@NODE" (kept old layout), "A NODE".
nm -D --defined-only --with-symbol-versions "$lib" |
	awk '{ s = $3; sub(/@@/, "@", s); if (s !~ /@/) s = s "@" s; print s }' |
	LC_ALL=C sort >"$tmp/lib"
sed -n 's/^ \([^ ]*\) .*/\1/p' "$file" | LC_ALL=C sort >"$tmp/file"
if diff -u "$tmp/file" "$tmp/lib" >"$tmp/diff"; then
	ok "$(wc -l <"$tmp/lib") exported symbol@node pairs, as the symbols file lists"
else
	bad "the library's exports differ from the symbols file (- file, + library)"
	sed 's/^/#   /' "$tmp/diff"
fi
exit $fail
