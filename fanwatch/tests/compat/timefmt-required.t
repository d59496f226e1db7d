#!/bin/sh
# %T without --timefmt is refused (status 1).
. "$(dirname "$0")/lib.sh"
mkdir d
"$TOOL" --format '%T %f' -t 1 d >out 2>err
[ $? = 1 ] && grep -q 'timefmt was not specified' err || fail "not refused"
