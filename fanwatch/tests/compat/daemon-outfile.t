#!/bin/sh
# -d runs in the background, logging to -o; the caller returns.
. "$(dirname "$0")/lib.sh"
mkdir d; : > log
"$TOOL" -d -t 3 -o "$T/log" -e create --format '%f' "$T/d" 2>err || fail "status $?"
sleep 1
: > d/x
wait_for '^x$' log || fail "nothing logged"
