#!/bin/sh
# -e moved_from prints the path the file was moved from.
. "$(dirname "$0")/lib.sh"
mkdir d; : > d/old
start_watch -e moved_from --format '%w%f %e' d
mv d/old d/new
wait "$WPID"; WPID=
[ "$(cat out)" = "d/old MOVED_FROM" ] || fail "got '$(cat out)'"
