#!/bin/sh
# -r: a directory made later is watched too.
. "$(dirname "$0")/lib.sh"
mkdir d
start_watch -m -r -e create --format '%w%f' d
mkdir d/n; sleep 0.3; : > d/n/f
wait_for '^d/n/f$' || fail "d/n/f not reported"
