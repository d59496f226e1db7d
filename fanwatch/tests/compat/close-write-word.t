#!/bin/sh
# A close after writing is printed CLOSE_WRITE,CLOSE.
. "$(dirname "$0")/lib.sh"
mkdir d
start_watch -e close_write --format '%e' d
echo x > d/a
wait "$WPID"; WPID=
[ "$(cat out)" = "CLOSE_WRITE,CLOSE" ] || fail "got '$(cat out)'"
