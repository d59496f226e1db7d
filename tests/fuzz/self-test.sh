#!/bin/sh
# tests/fuzz/run must fail on a crashing target, save the input under the
# build directory and name it; a clean target must pass.
# usage: self-test.sh BUILD_DIR
set -u
build=$(cd "$1" && pwd)
run=$(dirname "$0")/run
command -v clang >/dev/null || { echo "skip: clang is not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/t.c" <<'C'
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#ifdef CLEAN
#define BOOM() (void)0
#elif defined(UB)
/* UBSan reports this and, as built, carries on: the runner must stop it. */
static volatile int big = INT_MAX;
#define BOOM() (void)(big += d[0])
#else
#define BOOM() abort()
#endif
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	if (n >= 3 && d[0] == 'B' && d[1] == 'U' && d[2] == 'G')
		BOOM();
	return 0;
}
C
clang -g -fsanitize=fuzzer "$tmp/t.c" -o "$tmp/crashy" || { echo "not ok - build"; exit 1; }
clang -g -fsanitize=fuzzer -DCLEAN "$tmp/t.c" -o "$tmp/clean" ||
	{ echo "not ok - build"; exit 1; }
clang -g -fsanitize=fuzzer,undefined -DUB "$tmp/t.c" -o "$tmp/ub" ||
	{ echo "not ok - build"; exit 1; }
mkdir "$tmp/seeds"
printf 'BUG' >"$tmp/seeds/bug"
printf 'self-crash\t%s\t%s\n' "$tmp/crashy" "$tmp/seeds" >"$tmp/crash.targets"
printf 'self-clean\t%s\t%s\n' "$tmp/clean" "$tmp/seeds" >"$tmp/clean.targets"
printf 'self-ub\t%s\t%s\n' "$tmp/ub" "$tmp/seeds" >"$tmp/ub.targets"
fail=0
# crashes WHAT TARGETS: the run fails, and names an input saved under the
# build directory that is the one planted.
crashes() {
	out=$("$run" --build "$build" --seconds 2 --targets "$2" 2>&1)
	rc=$?
	art=$(printf '%s\n' "$out" | sed -n 's/.*; input \([^;]*\);.*/\1/p')
	if [ "$rc" -ne 0 ] && [ -f "$art" ] && [ "$(cat "$art")" = BUG ] &&
		[ "${art#"$build"/fuzz/}" != "$art" ]; then
		echo "ok - $1 fails the run and its input is saved under the build directory"
	else
		echo "not ok - $1: exit $rc, artifact '$art'"; printf '%s\n' "$out"; fail=1
	fi
}
crashes "a crash" "$tmp/crash.targets"
crashes "an undefined-behaviour report" "$tmp/ub.targets"
if "$run" --build "$build" --seconds 2 --targets "$tmp/clean.targets" >/dev/null 2>&1; then
	echo "ok - a clean target passes"
else
	echo "not ok - a clean target failed"; fail=1
fi
# --merge: what the run found that adds coverage joins the kept corpus.
mkdir "$tmp/kept"
printf 'x' >"$tmp/kept/x"
printf 'self-merge\t%s\t%s\n' "$tmp/clean" "$tmp/kept" >"$tmp/merge.targets"
out=$("$run" --build "$build" --seconds 2 --merge --targets "$tmp/merge.targets" 2>&1)
rc=$?
n=$(find "$tmp/kept" -type f | wc -l)
if [ "$rc" -eq 0 ] && [ "$n" -gt 1 ] && printf '%s\n' "$out" | grep -q '^ok - fuzz self-merge --merge: '; then
	echo "ok - --merge adds new inputs to the kept corpus ($n files now)"
else
	echo "not ok - --merge: exit $rc, $n files in the corpus"; printf '%s\n' "$out"; fail=1
fi
if "$run" --build "$build" --seconds 0 --targets "$tmp/clean.targets" >/dev/null 2>&1; then
	echo "not ok - --seconds 0 was accepted"; fail=1
else
	echo "ok - --seconds 0 is refused"
fi
exit $fail
