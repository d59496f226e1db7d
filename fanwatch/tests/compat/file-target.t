#!/bin/sh
# A file can be a target: its own events, %w the file, %f empty.
. "$(dirname "$0")/lib.sh"
echo a > f
start_watch -e modify f
echo b >> f
wait "$WPID"; WPID=
[ "$(cat out)" = "f MODIFY " ] || fail "got '$(cat out)'"
