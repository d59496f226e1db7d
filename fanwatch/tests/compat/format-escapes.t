#!/bin/sh
# --format escapes: %Xe events split by X, %T with --timefmt, %c the cookie
# (0 but for renames), %% a percent sign, %n a newline, %w%f the path.
. "$(dirname "$0")/lib.sh"
mkdir d
start_watch -m -e create -e close_write --format '%:e|%T|%c|%%|%n%w%f' --timefmt 'T%%' d
: > d/f
wait_for '^CLOSE_WRITE:CLOSE' || fail "no CLOSE_WRITE"
wait_for '^d/f$'
stop_watch
printf '%s\n' 'CREATE|T%|0|%|' 'd/f' 'CLOSE_WRITE:CLOSE|T%|0|%|' 'd/f' > want
diff want out >&2 || fail "format differs"
