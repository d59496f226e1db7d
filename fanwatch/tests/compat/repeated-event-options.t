#!/bin/sh
# Each -e adds to the events (inotifywait: -e ev1 -e ev2 ...).
. "$(dirname "$0")/lib.sh"
mkdir d
start_watch -m -e close_write -e moved_to --format '%e %f' d
echo x > d/a
echo y > b && mv b d/b
wait_for 'MOVED_TO b' || fail "no MOVED_TO"
grep -q 'CLOSE_WRITE,CLOSE a' out || fail "no CLOSE_WRITE"
