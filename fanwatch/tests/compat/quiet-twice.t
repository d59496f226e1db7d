#!/bin/sh
# -qq prints nothing, not even the event; the exit status tells.
. "$(dirname "$0")/lib.sh"
mkdir d
( sleep 1; : > d/x ) &
"$TOOL" -qq -e create d >out 2>err || fail "status $?"
[ ! -s out ] && [ ! -s err ] || fail "printed something"
