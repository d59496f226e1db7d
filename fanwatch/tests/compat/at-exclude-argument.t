#!/bin/sh
# @PATH among the targets on the command line excludes PATH and what is
# below it from a recursive watch.
. "$(dirname "$0")/lib.sh"
mkdir -p d/a d/b
start_watch -m -r -e create --format '%w%f' d @d/a
: > d/a/x; : > d/b/y
wait_for '^d/b/y$' || fail "no event in d/b"
grep -q 'x$' out && fail "an excluded path reported"
exit 0
