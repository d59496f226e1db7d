#!/bin/sh
# -r: a directory moved in has its contents reported (fanwatch: CREATE,SCAN;
# inotifywait reports nothing for them).
. "$(dirname "$0")/lib.sh"
mkdir -p d o/sub; : > o/sub/f
start_watch -m -r --format '%e %w%f' d
mv o/sub d/sub
wait_for ' d/sub/f$' || fail "d/sub/f not reported"
