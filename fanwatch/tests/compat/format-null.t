#!/bin/sh
# %0 prints a NUL byte: names with newlines can be split safely.
. "$(dirname "$0")/lib.sh"
mkdir d
start_watch -e create --format '%f%0' --no-newline d
: > "d/two
lines"
wait "$WPID"; WPID=
[ "$(od -An -c out | tr -d ' \n')" = 'two\nlines\0' ] || fail "got $(od -An -c out)"
