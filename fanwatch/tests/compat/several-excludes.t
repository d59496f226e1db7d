#!/bin/sh
# Several --exclude: each one excludes (inotifywait keeps only the last).
. "$(dirname "$0")/lib.sh"
mkdir d
start_watch -m -e create --format '%f' --exclude 'aaa' --exclude 'bbb' d
: > d/aaa; : > d/bbb; : > d/ccc
wait_for '^ccc$' || fail "no ccc"
grep -q 'aaa\|bbb' out && fail "an excluded name reported"
exit 0
