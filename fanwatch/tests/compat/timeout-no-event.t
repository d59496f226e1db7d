#!/bin/sh
# -t with no event: exit status 2.
. "$(dirname "$0")/lib.sh"
mkdir d
"$TOOL" -q -t 1 d >out 2>err
[ $? = 2 ] || fail "status not 2"
