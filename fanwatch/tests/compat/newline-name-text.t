#!/bin/sh
# A newline in a name, default text output: printed as it is (as
# inotifywait does); use %0, --csv or --json to split such names.
. "$(dirname "$0")/lib.sh"
mkdir d
start_watch -e create d
: > "d/a
b"
wait "$WPID"; WPID=
[ "$(cat out)" = "d/ CREATE a
b" ] || fail "got '$(cat out)'"
