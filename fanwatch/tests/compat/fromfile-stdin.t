#!/bin/sh
# --fromfile - reads the targets from standard input.
. "$(dirname "$0")/lib.sh"
mkdir d
( sleep 1; : > d/x ) &
echo d | "$TOOL" -q -e create --format '%f' --fromfile - >out 2>err || fail "status $?"
[ "$(cat out)" = x ] || fail "got '$(cat out)'"
