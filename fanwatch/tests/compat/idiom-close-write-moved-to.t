#!/bin/sh
# The common idiom: -e close_write -e moved_to and a case on the events.
. "$(dirname "$0")/lib.sh"
mkdir d tmp
start_watch -m -e close_write -e moved_to --format '%e|%f' d
echo 1 > d/a; echo 2 > d/b
echo 3 > tmp/c; mv tmp/c d/c
echo 4 > tmp/e; mv tmp/e d/e
wait_for '\|e$' || fail "no e"
stop_watch
n=0
while IFS='|' read -r ev f; do
	case $ev in CLOSE_WRITE,CLOSE|MOVED_TO) n=$((n + 1)) ;; esac
done < out
[ $n = 4 ] || fail "handled $n of 4"
