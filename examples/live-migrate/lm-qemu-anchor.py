#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""lm-qemu-anchor: QEMU's own live migration beside lm's three modes, in one sitting.

QEMU (precopy with its default downtime limit and with 10 ms, and
postcopy-ram) migrates a TCG guest of the same memory size as lm's region,
whose only program (lm-dirty) rewrites the same fraction of it, over
127.0.0.1 through lm-relay: the link is shaped outside QEMU, since QEMU
lifts its own max-bandwidth for the final stop-and-copy.  The pause is
QEMU's STOP event on the source to its RESUME event on the destination,
both stamped by the host's clock; QEMU's own "downtime" field is shown too,
but it ends when the source has sent its last byte and leaves out the
destination.  Then lm runs its three modes at the same size, stale
fraction and link, and one table prints all six.

Python 3 standard library only: QMP is JSON lines on a unix socket, and
the migration socket goes to QEMU as a descriptor (SCM_RIGHTS), so its
buffers can be clamped before QEMU sees it.
"""
import argparse
import fcntl
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PROG = 'lm-qemu-anchor'
# meson fills these in; in the build tree the tools are found beside this script
DATADIR = '@DATADIR@'
BINDIR = '@BINDIR@'

PAGE = 4096
QEMU_MODES = ('precopy', 'precopy-10ms', 'postcopy-ram')
LM_MODES = ('minor', 'stop-copy', 'postcopy-missing')
LABEL = {
    'precopy': 'QEMU precopy (default limit)',
    'precopy-10ms': 'QEMU precopy, 10 ms limit',
    'postcopy-ram': 'QEMU postcopy-ram',
    'minor': 'lm minor',
    'stop-copy': 'lm stop-copy',
    'postcopy-missing': 'lm postcopy-missing',
}
POLL = 0.02             # query-migrate interval, s
IDLE = 120              # no progress for this long: give up on a run, s


class Fail(Exception):
    """The sitting cannot go on: one message, exit 1."""


class RunFailed(Exception):
    """This run failed; the sitting goes on and the table says so."""


def die(msg):
    raise Fail(msg)


def say(msg):
    print(f'{PROG}: {msg}', file=sys.stderr, flush=True)


# ---------------------------------------------------------------- arguments

def parse_size(s):
    """'64M', '1G', '512K' (binary) into bytes: whole MiB from 16 MiB to 2 GiB.

    2 GiB: the guest is 32-bit without paging and its memory must lie below
    the PCI hole; a MiB granule: QEMU's -m takes MiB.
    """
    mult = {'k': 1 << 10, 'm': 1 << 20, 'g': 1 << 30}
    try:
        v = float(s[:-1]) * mult[s[-1].lower()] if s and s[-1].lower() in mult else float(s)
    except ValueError:
        die(f"--sizes: '{s}' is not a size like 64M")
    if not (16 << 20) <= v <= (2 << 30) or v % (1 << 20):
        die(f"--sizes: '{s}' must be whole MiB from 16M to 2G (the guest is 32-bit)")
    return int(v)


def parse_stale(s):
    try:
        v = float(s)
    except ValueError:
        die(f"--stale needs a number, not '{s}'")
    if not 0 < v <= 1:
        die(f"--stale must be in (0, 1], not '{s}'")
    return v


def parse_modes(s):
    modes = [m for m in s.split(',') if m]
    for m in modes:
        if m not in QEMU_MODES + LM_MODES:
            die(f"unknown mode '{m}' in --modes; known: {', '.join(QEMU_MODES + LM_MODES)}")
    if not modes:
        die('--modes names no mode')
    return modes


class Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f'{PROG}: {message}; see {PROG} --help', file=sys.stderr)
        sys.exit(1)


def arguments(argv):
    p = Parser(prog=PROG, description=(
        "Migrate the same memory size with QEMU's own migration and with lm's three "
        'modes over the same shaped link, and print the pauses side by side. '
        'A comparison of kinds: a VM with devices against one region of memory.'),
        epilog='exit: 0 every run verified (a QEMU precopy that never converges is a '
        'result, not a failure), 1 usage or setup, 4 a run failed or lost a write')
    p.add_argument('--sizes', default='64M', help='memory sizes, e.g. 64M,256M (default 64M)')
    p.add_argument('--stale', default='0.1',
                   help='fraction of memory rewritten continuously (default 0.1)')
    p.add_argument('--bandwidth', default='1G', help='link rate in bits/s (default 1G)')
    p.add_argument('--rtt', default='100us', help='link round trip (default 100us)')
    p.add_argument('--runs', type=int, default=3, help='runs per mode, interleaved (default 3)')
    p.add_argument('--modes', default=','.join(QEMU_MODES + LM_MODES),
                   help='which of them (default all six)')
    p.add_argument('--precopy', default='1',
                   help='seconds the workload runs before migrating (default 1)')
    p.add_argument('--after', default='0.5', help="lm's workload seconds after resume")
    p.add_argument('--sockbuf', default='256K',
                   help="SO_SNDBUF/SO_RCVBUF of QEMU's migration socket (default 256K, lm's own)")
    p.add_argument('--patience', type=int, default=10,
                   help='precopy: give up after this many passes without the dirty '
                   'memory shrinking (default 10)')
    p.add_argument('--budget', type=float, default=20,
                   help='precopy: give up after sending this many times the memory size '
                   '(default 20)')
    p.add_argument('--qemu', default='qemu-system-x86_64', help='QEMU binary')
    p.add_argument('--accel', default='tcg',
                   help="QEMU's -accel, e.g. tcg,thread=single (default tcg)")
    p.add_argument('--lm', help='lm binary (default: beside this script, else on PATH)')
    p.add_argument('--relay', help='lm-relay binary (default: as --lm)')
    p.add_argument('--guest', help='the guest image, lm-dirty.bin')
    p.add_argument('--keep', metavar='DIR',
                   help='keep serial logs and QMP transcripts in DIR')
    p.add_argument('--no-lock', action='store_true',
                   help='the caller already holds the machine lock (K513_LOCK)')
    p.add_argument('--check-guest', action='store_true',
                   help='only check the guest image and exit')
    p.add_argument('--transcripts', nargs=2, metavar=('SRC', 'DST'),
                   help='only compute one pause from two kept QMP transcripts')
    a = p.parse_args(argv)
    a.sizes = [parse_size(s) for s in a.sizes.split(',')]
    a.stale_f = parse_stale(a.stale)
    a.modes = parse_modes(a.modes)
    if not 1 <= a.runs <= 20:
        die('--runs must be in 1..20')
    if a.patience < 1 or a.budget <= 1:
        die('--patience must be at least 1 and --budget above 1')
    a.sockbuf_b = parse_size_any(a.sockbuf, '--sockbuf')
    for opt in ('precopy', 'after'):
        try:
            if not 0 <= float(getattr(a, opt)) <= 3600:
                raise ValueError
        except ValueError:
            die(f"--{opt} must be seconds in 0..3600, not '{getattr(a, opt)}'")
    return a


def parse_size_any(s, opt):
    mult = {'k': 1 << 10, 'm': 1 << 20}
    try:
        v = int(float(s[:-1]) * mult[s[-1].lower()]) if s[-1:].lower() in mult else int(s)
    except (ValueError, IndexError):
        die(f"{opt} needs a size like 256K, not '{s}'")
    if not 4096 <= v <= (64 << 20):
        die(f"{opt} must be in 4K..64M, not '{s}'")
    return v


def mib(n):
    return f'{n >> 20}M' if n % (1 << 30) else f'{n >> 30}G'


# ---------------------------------------------------------------- tools

def find_tool(name, given, installed):
    """given, else beside this script (the build tree), else installed, else PATH."""
    if given:
        cand = [given]
    else:
        here = os.path.dirname(os.path.realpath(__file__))
        cand = [os.path.join(here, name), installed, shutil.which(name) or '']
    for c in cand:
        if c and os.path.isfile(c) and (name.endswith('.bin') or os.access(c, os.X_OK)):
            return c
    return None


def check_guest(path):
    """The image must carry a multiboot header with load addresses (flat)."""
    try:
        with open(path, 'rb') as f:
            head = f.read(8192)
    except OSError as e:
        die(f'cannot read the guest image {path}: {e.strerror}')
    for off in range(0, len(head) - 32, 4):
        magic, flags, check = (int.from_bytes(head[off + i:off + i + 4], 'little')
                               for i in (0, 4, 8))
        if magic == 0x1BADB002 and (magic + flags + check) & 0xffffffff == 0:
            if not flags & 0x10000:
                die(f'{path}: its multiboot header gives no load addresses (an ELF?)')
            return off
    die(f'{path} is not a multiboot image (no header in its first 8 KiB)')


def qemu_version(qemu):
    try:
        out = subprocess.run([qemu, '--version'], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        die(f'{qemu} does not run: {e}')
    return out.splitlines()[0] if out else '?'


def take_lock(a):
    """The machine-wide lock of vm/ (guests, kernel builds): guests never overlap."""
    if a.no_lock:
        return None
    path = os.environ.get('K513_LOCK', '/tmp/k513-vm.lock')
    f = open(path, 'a')
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        say(f'waiting for another k513 kernel build or guest to finish (lock {path})')
        fcntl.flock(f, fcntl.LOCK_EX)
    return f


def loadavg():
    with open('/proc/loadavg') as f:
        return ' '.join(f.read().split()[:3])


# ---------------------------------------------------------------- QMP

def event_time(ev):
    ts = ev['timestamp']
    return ts['seconds'] + ts['microseconds'] / 1e6


class Qmp:
    """QMP on a unix socket: commands in order, events kept as they come.

    Every JSON object either way is appended to the transcript, so a pause
    can be computed again from kept files (--transcripts).
    """

    def __init__(self, path, proc, transcript):
        self.log = []
        self.out = open(transcript, 'w')
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        start = time.monotonic()
        while True:
            try:
                self.sock.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if proc.poll() is not None:
                    raise RunFailed(f'QEMU exited ({proc.returncode}) before its QMP socket opened')
                if time.monotonic() - start > IDLE:
                    raise RunFailed(f'QEMU did not open its QMP socket in {IDLE} s')
                time.sleep(0.05)
        self.f = self.sock.makefile('rb')
        self._read()                    # the greeting
        self.cmd('qmp_capabilities')

    def _note(self, obj):
        self.log.append(obj)
        self.out.write(json.dumps(obj) + '\n')

    def _read(self):
        line = self.f.readline()
        if not line:
            raise RunFailed('QEMU closed its QMP socket')
        obj = json.loads(line)
        self._note(obj)
        return obj

    def cmd(self, name, args=None, fds=None):
        msg = {'execute': name}
        if args:
            msg['arguments'] = args
        self._note(msg)
        data = (json.dumps(msg) + '\n').encode()
        if fds:
            socket.send_fds(self.sock, [data], fds)
        else:
            self.sock.sendall(data)
        while True:
            obj = self._read()
            if 'event' in obj:
                continue
            if 'error' in obj:
                raise RunFailed(f"QMP {name}: {obj['error'].get('desc', obj['error'])}")
            return obj.get('return')

    def event(self, name):
        return next((o for o in self.log if o.get('event') == name), None)

    def close(self):
        self.out.close()
        self.sock.close()


def summarize(src, dst):
    """The pause and QEMU's own figures from both transcripts (lists of objects).

    The pause runs from the source's STOP (its vCPUs are paused) to the
    destination's RESUME (sent just before its vCPUs run): both stamped
    with the host's wall clock, so one subtraction.
    """
    stop = next((o for o in src if o.get('event') == 'STOP'), None)
    resume = next((o for o in dst if o.get('event') == 'RESUME'), None)
    if not stop:
        raise RunFailed('no STOP event in the source transcript')
    if not resume:
        raise RunFailed('no RESUME event in the destination transcript')
    done = [o['return'] for o in src if isinstance(o.get('return'), dict) and
            o['return'].get('status') == 'completed']
    # right after "completed" query-migrate may still say 0: take the last
    downtime = max((r.get('downtime', 0) for r in done), default=None)
    blocked = [o['return']['postcopy-blocktime'] for o in dst
               if isinstance(o.get('return'), dict) and 'postcopy-blocktime' in o['return']]
    ram = done[-1].get('ram', {}) if done else {}
    postcopy = any(isinstance(o.get('return'), dict) and
                   o['return'].get('status') == 'postcopy-active' for o in src)
    return {
        'pause_ms': (event_time(resume) - event_time(stop)) * 1e3,
        'qemu_downtime_ms': downtime or None,
        'blocktime_ms': blocked[-1] if blocked and postcopy else None,
        'paused_bytes': ram.get('downtime-bytes'),
        'postcopy': postcopy,
        'sent': ram.get('transferred'),
        'total_ms': done[-1].get('total-time') if done else None,
    }


def read_transcript(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        die(f'cannot read the transcript {path}: {e}')


# ---------------------------------------------------------------- one QEMU run

class Link:
    """Two TCP connections joined by lm-relay: the source's end, the destination's.

    Both ends are made here, so their buffers are set before any handshake
    (a fixed size also stops the autotuning that grows QEMU's send buffer
    to ~4 MiB, ~30 ms at 1 Gbit/s in front of every pause).
    """

    def __init__(self, a, relay, workdir):
        self.src = self.dst = None
        self.err = open(os.path.join(workdir, 'relay.err'), 'w')
        lst = socket.socket()
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.sockbuf_b)
        lst.bind(('127.0.0.1', 0))
        lst.listen(1)
        self.proc = subprocess.Popen(
            [relay, '--listen', '127.0.0.1:0', '--to', '127.0.0.1:%d' % lst.getsockname()[1],
             '--bandwidth', a.bandwidth, '--rtt', a.rtt],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.err, text=True)
        try:
            line = self.proc.stdout.readline()
            if 'listening on' not in line:
                raise RunFailed(f'lm-relay did not start: {tail(self.err.name)}')
            self.src = socket.socket()
            self.src.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, a.sockbuf_b)
            self.src.connect(('127.0.0.1', int(line.rsplit(':', 1)[1])))
            lst.settimeout(IDLE)
            self.dst, _ = lst.accept()
        except OSError as e:
            self.close()
            raise RunFailed(f'the link through lm-relay: {e}')
        except RunFailed:
            self.close()
            raise
        finally:
            lst.close()

    def hand_over(self, end):
        """Once a QEMU holds its end, ours goes: its close must reach the relay."""
        sock = getattr(self, end)
        if sock:
            sock.close()
            setattr(self, end, None)

    def close(self):
        self.hand_over('src')
        self.hand_over('dst')
        stop(self.proc)
        self.err.close()


def tail(path, n=5):
    try:
        with open(path, errors='replace') as f:
            return ' | '.join(f.read().splitlines()[-n:])
    except OSError:
        return ''


def stop(proc, grace=10):
    """End a child of ours: it was asked to quit; after grace, kill it by its pid."""
    if proc.poll() is None:
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Guest:
    """One QEMU: the source boots lm-dirty, the destination waits (-incoming defer)."""

    def __init__(self, a, role, size, hot, workdir, pass_fds=()):
        self.role = role
        self.serial = os.path.join(workdir, f'serial-{role}.log')
        qmp = os.path.join(workdir, f'qmp-{role}.sock')
        self.errpath = os.path.join(workdir, f'qemu-{role}.err')
        argv = [a.qemu, '-machine', 'pc', '-accel', a.accel, '-cpu', 'qemu64', '-smp', '1',
                '-m', f'{size >> 20}M', '-nodefaults', '-no-user-config', '-display', 'none',
                '-kernel', a.guest, '-append', f'hot={hot} sweep=256',
                '-chardev', f'file,id=con,path={self.serial}', '-serial', 'chardev:con',
                '-qmp', f'unix:{qmp},server=on,wait=off', '-name', f'lm-anchor-{role}']
        if role == 'dst':
            argv += ['-incoming', 'defer']
        with open(self.errpath, 'w') as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err,
                                         stderr=err, pass_fds=pass_fds)
        try:
            self.qmp = Qmp(qmp, self.proc, os.path.join(workdir, f'qmp-{role}.jsonl'))
        except RunFailed as e:
            stop(self.proc, 0)
            raise RunFailed(f'{role}: {e}: {tail(self.errpath)}')

    def cmd(self, *args, **kw):
        if self.proc.poll() is not None:
            raise RunFailed(f'the {self.role} QEMU exited ({self.proc.returncode}): '
                            f'{tail(self.errpath)}')
        return self.qmp.cmd(*args, **kw)

    def serial_text(self):
        with open(self.serial, errors='replace') as f:
            return f.read()

    def wait_serial(self, done, what):
        """Until done(text); give up only when the log stops growing for IDLE s."""
        last, since = -1, time.monotonic()
        while True:
            text = self.serial_text()
            if done(text):
                return text
            if len(text) != last:
                last, since = len(text), time.monotonic()
            if self.proc.poll() is not None or time.monotonic() - since > IDLE:
                raise RunFailed(f'{self.role} guest: no {what} ({tail(self.serial, 2)!r}); '
                                f'{tail(self.errpath)}')
            time.sleep(0.05)

    def close(self):
        try:
            if self.proc.poll() is None:
                self.qmp.cmd('quit')
        except (RunFailed, OSError):
            pass
        stop(self.proc)
        self.qmp.close()


class Converge:
    """Whether a precopy still gets anywhere.

    After the first full pass, each pass starts with the memory dirtied
    during the last one; its largest 'remaining' seen is that dirty set.
    A pass whose dirty set is not below 90% of the smallest so far made
    no progress; --patience such passes, or --budget times the memory
    sent, and QEMU would go on for ever: it never converges.
    """

    def __init__(self, a, size):
        self.patience, self.budget = a.patience, a.budget * size
        self.sync, self.peak, self.best, self.stuck = 0, 0, None, 0

    def update(self, ram):
        sync = ram.get('dirty-sync-count', 0)
        if sync != self.sync:
            if self.sync >= 2:
                if self.best is None or self.peak < 0.9 * self.best:
                    self.best, self.stuck = self.peak, 0
                else:
                    self.stuck += 1
            self.sync, self.peak = sync, 0
        self.peak = max(self.peak, ram.get('remaining', 0))

    def hopeless(self, sent):
        return self.stuck >= self.patience or sent > self.budget


def migrate(a, mode, src, dst, size):
    """Poll until completed; None, or why it was given up (never converged)."""
    conv = Converge(a, size)
    started_postcopy = False
    sent_before, since = -1, time.monotonic()
    while True:
        info = src.cmd('query-migrate')
        dst.cmd('query-status')         # reads the destination's events as they come
        status, ram = info.get('status'), info.get('ram', {})
        if status == 'completed':
            return None
        if status in ('failed', 'cancelled'):
            raise RunFailed(f"migration {status}: {info.get('error-desc', '')}")
        sent = ram.get('transferred', 0)
        if sent != sent_before:
            sent_before, since = sent, time.monotonic()
        elif time.monotonic() - since > IDLE:
            raise RunFailed(f'migration stalled: nothing sent for {IDLE} s ({status})')
        if mode == 'postcopy-ram':
            # after the first full pass, as lm switches after its precopy rounds
            if not started_postcopy and status == 'active' and \
                    ram.get('dirty-sync-count', 0) >= 2:
                src.cmd('migrate-start-postcopy')
                started_postcopy = True
        elif status == 'active':
            conv.update(ram)
            if conv.hopeless(sent):
                return give_up(src, conv, info)
        time.sleep(POLL)


def give_up(src, conv, info):
    src.cmd('migrate_cancel')
    while src.cmd('query-migrate').get('status') not in ('cancelled', 'failed', 'completed'):
        time.sleep(POLL)
    return {
        'passes': conv.sync, 'sent': info['ram'].get('transferred', 0),
        'dirty': conv.best or 0, 'expected_ms': info.get('expected-downtime'),
    }


def verify(src, dst):
    """Two SWEEPs on the destination: every page was checked there since the resume.

    The guest counts what it found in every SWEEP line; the first few finds
    are printed as they come (LOST: a hot page that missed a write; CORRUPT:
    a cold page the fill wrote that now holds something else).
    """
    text = dst.wait_serial(lambda t: t.count('SWEEP') >= 2, 'two SWEEP lines after the resume')
    lost = corrupt = 0
    for t in (src.serial_text(), text):
        for ln in t.splitlines():
            w = ln.split()
            if w[:1] == ['SWEEP'] and len(w) == 8:
                lost, corrupt = max(lost, int(w[5])), max(corrupt, int(w[7]))
    if not lost and not corrupt:
        return 'ok'
    first = next(ln for ln in text.splitlines() if ln.startswith(('LOST', 'CORRUPT')))
    return (f'WRONG DATA on the destination: {lost} hot pages missed writes, '
            f'{corrupt} cold pages overwritten (first: {first})')


def qemu_run(a, tools, mode, size, workdir):
    hot = max(1, round(size * a.stale_f / PAGE))
    link = Link(a, tools['relay'], workdir)
    guests = []
    try:
        dst_fd = link.dst.fileno()
        src = Guest(a, 'src', size, hot, workdir)
        guests.append(src)
        dst = Guest(a, 'dst', size, hot, workdir, pass_fds=(dst_fd,))
        guests.append(dst)
        link.hand_over('dst')
        src.wait_serial(lambda t: 'READY' in t, 'READY (filling its memory)')
        time.sleep(float(a.precopy))
        caps = [{'capability': 'postcopy-ram', 'state': mode == 'postcopy-ram'}]
        src.cmd('migrate-set-capabilities', {'capabilities': caps})
        dst.cmd('migrate-set-capabilities', {'capabilities': caps + [
            {'capability': 'postcopy-blocktime', 'state': mode == 'postcopy-ram'}]})
        src.cmd('query-migrate-parameters')    # QEMU's defaults, for the transcript
        # the relay is the link: QEMU's own rate limit must not be
        params = {'max-bandwidth': 1 << 40}
        if mode == 'precopy-10ms':
            params['downtime-limit'] = 10
        elif mode == 'postcopy-ram':
            # else, with 300 ms, it ends in precopy before the switch
            params['downtime-limit'] = 1
        src.cmd('migrate-set-parameters', params)
        limit = src.cmd('query-migrate-parameters').get('downtime-limit')
        dst.cmd('migrate-incoming', {'uri': f'fd:{dst_fd}'})
        src.cmd('getfd', {'fdname': 'migration'}, fds=[link.src.fileno()])
        link.hand_over('src')
        src.cmd('migrate', {'uri': 'fd:migration'})
        gave_up = migrate(a, mode, src, dst, size)
        if gave_up:
            return {'converged': False, 'limit': limit, 'mode': mode, **gave_up}
        return {'mode': mode, **finish(src, dst, limit)}
    finally:
        for g in reversed(guests):
            g.close()
        link.close()


def finish(src, dst, limit):
    """After 'completed': wait for RESUME, the settled downtime field, then verify."""
    since = time.monotonic()
    while not dst.qmp.event('RESUME'):
        status = dst.cmd('query-status').get('status')
        if status == 'running':
            break
        if time.monotonic() - since > IDLE:
            raise RunFailed(f'the destination did not resume in {IDLE} s ({status})')
        time.sleep(POLL)
    for _ in range(50):
        info = src.cmd('query-migrate')
        if info.get('downtime'):
            break
        time.sleep(POLL)
    dst.cmd('query-migrate')            # postcopy-blocktime, when asked for
    r = summarize(src.qmp.log, dst.qmp.log)
    r.update(converged=True, limit=limit, verify=verify(src, dst))
    if r['paused_bytes'] is not None:
        r['paused_mib'] = r['paused_bytes'] / 2**20
    return r


# ---------------------------------------------------------------- one lm run

def lm_run(a, lm, mode, size):
    argv = [lm, 'run', '--mode', mode, '--size', mib(size), '--stale', a.stale,
            '--bandwidth', a.bandwidth, '--rtt', a.rtt, '--precopy', a.precopy,
            '--after', a.after, '--verify', '--json', '-q']
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    # 10: the region does not fit here (its cgroup, the huge page pool)
    if p.returncode in (1, 10):
        die(f"lm refused or failed to set up: {p.stderr.strip() or '(no message)'}")
    try:
        rep = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RunFailed(f'lm exited {p.returncode} without a report: {p.stderr.strip()[-200:]}')
    ok = p.returncode == 0 and not rep.get('mismatched') and rep.get('invariants_ok')
    return {'converged': True, 'pause_ms': rep['downtime_ms'],
            'verify': 'ok' if ok else f'FAILED (exit {p.returncode})'}


# ---------------------------------------------------------------- the table

def spread(v):
    return min(v), statistics.median(v), max(v)


def cell(rs):
    """min median max of the pauses, or why there are none."""
    done = [r['pause_ms'] for r in rs if r.get('converged') and 'pause_ms' in r]
    if not done:
        return '%-26s' % ('did not converge' if any(r.get('converged') is False for r in rs)
                          else 'failed'), None
    lo, med, hi = spread(done)
    return f'{lo:8.2f} {med:8.2f} {hi:8.2f}', med


def joined(rs, key, fmt='%g'):
    """One figure per run, in run order: 'a/b/c', or None when no run has it."""
    v = [fmt % r[key] for r in rs if r.get(key) is not None]
    return '/'.join(v) if v else None


def qemu_note(rs):
    """QEMU's own figures beside the pause, and the runs it gave up on."""
    parts = []
    limit = next((r['limit'] for r in rs if r.get('limit') is not None), None)
    if limit is not None:
        parts.append(f'limit {limit} ms')
    for key, fmt, what in (('qemu_downtime_ms', '%g', "QEMU's downtime field %s ms"),
                           ('paused_mib', '%.1f', 'sent while paused %s MiB'),
                           ('blocktime_ms', '%g', 'vCPU blocked %s ms after resume')):
        v = joined(rs, key, fmt)
        if v:
            parts.append(what % v)
    pre = [r for r in rs if r.get('converged') and r.get('postcopy') is False]
    if pre and any(r.get('mode') == 'postcopy-ram' for r in rs):
        parts.append(f'{len(pre)}/{len(rs)} ended in precopy before the switch')
    no = [r for r in rs if r.get('converged') is False]
    if no:
        r = no[0]
        parts.append(f"{len(no)}/{len(rs)} gave up: {r['passes']} passes, "
                     f"{r['sent'] / 2**20:.0f} MiB sent, dirty set ~{r['dirty'] / 2**20:.1f} "
                     f"MiB, QEMU expected {r['expected_ms']} ms")
    return parts


def note(mode, rs):
    """What else the runs said: QEMU's own figures, give-ups, verification."""
    parts = qemu_note(rs) if mode in QEMU_MODES else []
    fails = [r for r in rs if r.get('verify', 'ok') != 'ok' or r.get('error')]
    if fails:
        parts.append('; '.join(r.get('error') or r['verify'] for r in fails))
    elif any(r.get('verify') == 'ok' for r in rs):
        parts.append('verified')
    return '; '.join(parts)


def table(a, results, header):
    print('\n'.join(header))
    print('%-5s %-10s %-29s | %-26s | %9s | %s' % ('size', 'moves', 'what',
                                                   'pause ms: min median max', 'x minor', 'notes'))
    for size in a.sizes:
        base = cell(results.get((size, 'minor'), []))[1]
        for mode in a.modes:
            rs = results.get((size, mode), [])
            text, med = cell(rs)
            ratio = f'{med / base:8.1f}x' if med is not None and base else '%9s' % '-'
            kind = 'a VM' if mode in QEMU_MODES else 'one region'
            print('%-5s %-10s %-29s | %s | %s | %s' % (mib(size), kind, LABEL[mode], text, ratio,
                                                        note(mode, rs)))


# ---------------------------------------------------------------- main

def one(a, tools, mode, size, i, keep):
    workdir = tempfile.mkdtemp(prefix='lm-anchor-')
    try:
        if mode in QEMU_MODES:
            r = qemu_run(a, tools, mode, size, workdir)
        else:
            r = lm_run(a, tools['lm'], mode, size)
    except RunFailed as e:
        r = {'converged': None, 'error': str(e)}
    if keep:
        dest = os.path.join(keep, f'{mib(size)}-{mode}-{i + 1}')
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(workdir, dest, ignore=shutil.ignore_patterns('*.sock'))
    shutil.rmtree(workdir, ignore_errors=True)
    return r


def progress(size, i, runs, mode, r):
    if r.get('error'):
        what = 'FAILED: ' + r['error']
    elif not r.get('converged'):
        what = f"did not converge ({r['passes']} passes, {r['sent'] / 2**20:.0f} MiB sent)"
    else:
        what = f"pause {r['pause_ms']:.2f} ms"
        if r.get('qemu_downtime_ms'):
            what += f" (QEMU's field: {r['qemu_downtime_ms']} ms)"
        what += f", verify {r['verify']}"
    say(f'{mib(size)} run {i + 1}/{runs} {mode}: {what}')


def find_guest(a):
    a.guest = find_tool('lm-dirty.bin', a.guest, os.path.join(DATADIR, 'lm-dirty.bin')) or \
        die('the guest image lm-dirty.bin was not found (only an x86 compiler builds it); '
            'give --guest PATH')
    check_guest(a.guest)


def find_tools(a):
    tools = {}
    wants_qemu = any(m in QEMU_MODES for m in a.modes)
    if any(m in LM_MODES for m in a.modes):
        tools['lm'] = find_tool('lm', a.lm, os.path.join(BINDIR, 'lm')) or \
            die('lm not found: build the project or give --lm PATH')
    if wants_qemu:
        found = shutil.which(a.qemu)
        if not found:
            die(f"QEMU not found: '{a.qemu}' (install qemu-system-x86 or give --qemu PATH; "
                '--modes minor,stop-copy,postcopy-missing runs lm alone)')
        a.qemu = found
        tools['relay'] = find_tool('lm-relay', a.relay, os.path.join(BINDIR, 'lm-relay')) or \
            die('lm-relay not found: build the project or give --relay PATH')
        find_guest(a)
    return tools


def header(a, qemu):
    lines = [f'{PROG}: one sitting, {a.runs} run(s) per mode, modes interleaved']
    if qemu:
        lines.append(f'  QEMU: {qemu}, TCG, pc machine and its devices, 1 vCPU, -cpu qemu64, '
                     'guest lm-dirty (no OS)')
    lines += [
        '  A COMPARISON OF KINDS: QEMU moves a whole VM (RAM, CPU and device state); '
        'lm moves one region of memory.',
        f'  the same for both: memory size, {a.stale_f:g} of it rewritten continuously, '
        f'link {a.bandwidth}bit/s and {a.rtt} RTT',
        "  (QEMU: through lm-relay, its max-bandwidth lifted, its socket buffers "
        f"{a.sockbuf}; lm: its own pacing and {a.sockbuf} buffers)",
        "  pause: QEMU: STOP on the source to RESUME on the destination (host clock); "
        "lm: its downtime",
    ]
    return lines


def sitting(a, tools):
    results = {}
    for size in a.sizes:
        for i in range(a.runs):
            for mode in a.modes:
                r = one(a, tools, mode, size, i, a.keep)
                results.setdefault((size, mode), []).append(r)
                progress(size, i, a.runs, mode, r)
    return results


def main(argv):
    a = arguments(argv)
    if a.transcripts:
        r = summarize(*(read_transcript(p) for p in a.transcripts))
        dash = {k: '-' if v is None else v for k, v in r.items()}
        print(f"pause {r['pause_ms']:.3f} ms; QEMU's downtime field {dash['qemu_downtime_ms']} ms; "
              f"postcopy {'yes' if r['postcopy'] else 'no'}, vCPU blocked "
              f"{dash['blocktime_ms']} ms")
        return 0
    if a.check_guest:
        find_guest(a)
        print(f'{a.guest}: a flat multiboot image')
        return 0
    tools = find_tools(a)
    qemu = qemu_version(a.qemu) if 'relay' in tools else None
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    lock = take_lock(a) if qemu else None
    before = loadavg()
    results = sitting(a, tools)
    lines = header(a, qemu) + [f'  load average (1/5/15 min) {before} before, {loadavg()} '
                               f'after, {os.cpu_count()} CPUs: a busy machine inflates both']
    table(a, results, lines)
    if lock:
        lock.close()
    bad = [r for rs in results.values() for r in rs
           if r.get('error') or r.get('verify', 'ok') != 'ok']
    return 4 if bad else 0


def interrupted(signum, frame):
    raise SystemExit(128 + signum)      # unwinds: every child is ended by its pid


if __name__ == '__main__':
    signal.signal(signal.SIGTERM, interrupted)
    try:
        sys.exit(main(sys.argv[1:]))
    except Fail as e:
        say(str(e))
        sys.exit(1)
    except RunFailed as e:
        say(str(e))
        sys.exit(4)
    except KeyboardInterrupt:
        sys.exit(130)
