#!/bin/sh
# A rename is two lines, MOVED_FROM then MOVED_TO, sharing a %c cookie;
# other events have cookie 0.
. "$(dirname "$0")/lib.sh"
mkdir d
start_watch -m -e create -e moved_from -e moved_to --format '%c %e %w%f' d
: > d/src
mv d/src d/dst
wait_for 'MOVED_TO d/dst' || fail "no MOVED_TO"
set -- $(sed -n 1p out); [ "$1 $2" = "0 CREATE" ] || fail "line 1"
set -- $(sed -n 2p out); a=$1; [ "$2 $3" = "MOVED_FROM d/src" ] || fail "line 2"
set -- $(sed -n 3p out); [ "$1" = "$a" ] && [ "$a" != 0 ] || fail "cookies"
