#!/usr/bin/env python3
# Writes the seed corpus for fuzz-decode: event buffers laid out as the
# kernel lays them out (fanotify_event_metadata, then info records).
import os, struct
here = os.path.dirname(os.path.abspath(__file__))

def fid(kind, handle, name=None):
    body = struct.pack("<ii", 7, 9) + struct.pack("<Ii", len(handle), 1) + handle
    if name is not None:
        body += name + b"\0"
    body += b"\0" * ((-(4 + len(body))) % 4)
    return struct.pack("<BBH", kind, 0, 4 + len(body)) + body

def event(mask, recs, pid=0):
    rec = b"".join(recs)
    return struct.pack("<IBBHQii", 24 + len(rec), 3, 0, 24, mask, -1, pid) + rec

H1, H2, H3 = b"\x01" * 8, b"\x02" * 8, b"\x03" * 12
seeds = {
    "create-file": event(0x100, [fid(2, H1, b"f"), fid(1, H3)]),
    "create-dir-merged": event(0x40000100 | 0x200, [fid(2, H1, b"d"), fid(1, H2)]),
    "close-write-self-pid": event(0x8 | 0x2, [fid(2, H1, b"x")], pid=1234),
    "self-dot": event(0x40000800, [fid(2, H2, b".")]),
    "rename": event(0x10000000, [fid(10, H1, b"old"), fid(12, H2, b"new"), fid(1, H3)]),
    "rename-out": event(0x10000000 | 0x40000000, [fid(10, H1, b"gone"), fid(1, H3)]),
    "overflow": struct.pack("<IBBHQii", 24, 3, 0, 24, 0x4000, -1, 0),
    "odd-name": event(0x100, [fid(2, H1, b"q\"u,o\nte\xff")]),
    "two-events": event(0x100, [fid(2, H1, b"a")]) + event(0x200, [fid(2, H1, b"a")]),
    "truncated": event(0x100, [fid(2, H1, b"trunc")])[:30],
    "bad-reclen": event(0x100, [fid(2, H1, b"z")])[:24] + struct.pack("<BBH", 2, 0, 200),
}
for name, data in seeds.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)
