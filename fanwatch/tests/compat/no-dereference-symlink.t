#!/bin/sh
# -P watches the symlink itself: touch -h on it is an event.
. "$(dirname "$0")/lib.sh"
: > target; ln -s target link
( sleep 1; touch -h link ) &
"$TOOL" -q -P -t 3 link >out 2>err || fail "status $?"
