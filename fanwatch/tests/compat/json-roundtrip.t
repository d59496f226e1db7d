#!/bin/sh
# --json (fanwatch): schema 2, read_time, absolute paths; a name that is
# not UTF-8 or holds a newline comes back byte for byte (surrogateescape).
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
command -v python3 >/dev/null || exit 77
mkdir d
start_watch -m -e create --json d
python3 -c 'import os; [open(b"d/"+n,"w").close() for n in (b"nl\nx", b"bad\xff\xfe", b"end")]'
wait_for '/d/end"' || fail "no end"
stop_watch
python3 - "$T" <<'P' || fail "json disagrees"
import json, os, sys
objs = [json.loads(l) for l in open("out", encoding="utf-8")]
for o in objs:
    assert o["schema"] == 2 and "read_time" in o and o["path"].startswith("/"), o
got = [os.path.basename(o["path"]).encode("utf-8", "surrogateescape") for o in objs]
assert got == [b"nl\nx", b"bad\xff\xfe", b"end"], got
assert objs[0]["path"] == sys.argv[1] + "/d/nl\nx", objs[0]["path"]
P
