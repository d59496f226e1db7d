#!/bin/sh
# --csv and --format together are refused (status 1).
. "$(dirname "$0")/lib.sh"
mkdir d
"$TOOL" -c --format '%w' -t 1 d >out 2>err
[ $? = 1 ] && grep -q 'cannot both be specified' err || fail "not refused"
