#!/bin/sh
# --exec exit status policy: a failed run is reported and watching goes on;
# with --exit-on-failure fanwatch ends with the run's status.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir d
start_watch --settle 50 --exec 'exit 3' d </dev/null
wait_for "exited with status 3" err || fail "no message"
kill -0 "$WPID" 2>/dev/null || fail "stopped watching"
stop_watch
"$TOOL" -q --exit-on-failure --exec 'exit 3' d </dev/null >out 2>err
[ $? = 3 ] || fail "status not 3"
