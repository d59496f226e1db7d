#!/bin/sh
# --csv is RFC 4180: Python's csv module reads back odd names exactly
# (a comma, a quote, a newline, a leading space, a byte that is not UTF-8).
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || exit 77
mkdir d
start_watch -m -e create --csv d
python3 -c 'import os; [open(os.fsencode("d/")+n,"w").close() for n in (b"a,b", b"q\"u", b"nl\nx", b" lead", b"bad\xff", b"end")]'
wait_for '^d/,CREATE,end$' || fail "no end"
stop_watch
python3 - <<'P' || fail "python csv disagrees"
import csv, io
raw = open("out", "rb").read().decode("utf-8", "surrogateescape")
names = [r[2] for r in csv.reader(io.StringIO(raw, newline=""))]
want = [n.decode("utf-8", "surrogateescape") for n in (b"a,b", b"q\"u", b"nl\nx", b" lead", b"bad\xff", b"end")]
assert names == want, (names, want)
P
