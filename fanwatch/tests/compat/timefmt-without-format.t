#!/bin/sh
# --timefmt without --format is refused (status 1), as inotifywait does.
. "$(dirname "$0")/lib.sh"
mkdir d
"$TOOL" --timefmt '%Y' -t 1 d >out 2>err
[ $? = 1 ] && grep -q 'timefmt cannot be specified without --format' err || fail "not refused"
