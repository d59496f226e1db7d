#!/bin/sh
# --csv: dir,EVENTS,name; a field with a comma is quoted.
. "$(dirname "$0")/lib.sh"
mkdir d
start_watch -e close_write --csv d
: > d/f
wait "$WPID"; WPID=
[ "$(cat out)" = 'd/,"CLOSE_WRITE,CLOSE",f' ] || fail "got '$(cat out)'"
