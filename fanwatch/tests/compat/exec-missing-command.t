#!/bin/sh
# --exec with a command that does not exist: one message, status 1.
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir d
"$TOOL" -q --exec 'no-such-command-k513' d >out 2>err
[ $? = 1 ] || fail "status not 1"
grep -q "could not be run (exit 127: command not found)" err || fail "no message"
