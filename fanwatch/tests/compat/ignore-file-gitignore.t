#!/bin/sh
# --ignore-file (fanwatch): git's rules, relative to the file's directory.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir -p d/build d/src/deep d/keep
printf '# comment\nbuild/\n*.o\n!keep.o\n/top-only\n**/deep/*.tmp\n' > d/.gitignore
start_watch -m -r -e create --format '%w%f' --ignore-file d/.gitignore d
: > d/build/x; : > d/a.o; : > d/keep.o; : > d/top-only; : > d/src/top-only
: > d/src/deep/y.tmp; : > d/src/deep/y.c; : > d/end
wait_for '^d/end$' || fail "no end"
stop_watch
got=$(grep -v '^d/end$' out | sort | tr '\n' ' ')
[ "$got" = "d/keep.o d/src/deep/y.c d/src/top-only " ] || fail "got: $got"
