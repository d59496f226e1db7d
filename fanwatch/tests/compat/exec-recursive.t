#!/bin/sh
# --exec watches subdirectories (new ones too) without -r, as a
# run-on-change tool is meant to; --no-recursive only the directory given.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir -p d/sub
start_watch --postpone --settle 50 --exec 'printf "%s\n" "$@" >> paths' d </dev/null
: > d/sub/a
wait_for 'd/sub/a' paths || fail "no run for d/sub/a"
mkdir d/new; sleep 0.3; : > d/new/b
wait_for 'd/new/b' paths || fail "no run for a file in a new subdirectory"
stop_watch
rm -f paths
start_watch --no-recursive --postpone --settle 50 --exec 'printf "%s\n" "$@" >> paths' d </dev/null
: > d/sub/c
sleep 0.6
[ -e paths ] && fail "--no-recursive ran for d/sub/c: $(cat paths)"
: > d/top
wait_for 'd/top' paths || fail "--no-recursive: no run for d/top"
exit 0
