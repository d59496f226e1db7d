#!/bin/sh
# @PATH lines of --fromfile and --exclude both apply.
. "$(dirname "$0")/lib.sh"
mkdir -p d/a d/b d/c
printf 'd\n@d/a\n' > list
start_watch -m -r -e create --format '%w%f' --fromfile list --exclude '/b'
: > d/a/x; : > d/b/y; : > d/c/z
wait_for '^d/c/z$' || fail "no event in d/c"
grep -q 'x$\|y$' out && fail "an excluded path reported"
exit 0
