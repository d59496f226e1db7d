#!/bin/sh
# Several --include: a path matching any of them is reported.
. "$(dirname "$0")/lib.sh"
mkdir d
start_watch -m -e create --format '%f' --include '\.c$' --include '\.h$' d
: > d/x.o; : > d/x.c; : > d/x.h; : > d/end.h
wait_for '^end.h$' || fail "no end.h"
grep -q 'x.c' out || fail "x.c not reported"
grep -q 'x.o' out && fail "x.o reported"
exit 0
