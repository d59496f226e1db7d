#!/bin/sh
# The rebuild-the-tree tests on one filesystem type:
#   run-rebuild.sh FANWATCH FW_REBUILD tmpfs|ext4|xfs|btrfs [PROGRAM ARGS...]
# With PROGRAM (fw-model), it runs "PROGRAM FANWATCH FW_REBUILD DIR ARGS..."
# instead of cases.sh.
# As root: a filesystem made by the test (tmpfs, or an image on a loop
# device), handed to uid 65534, which runs fanwatch and the workloads.  A
# type the running kernel does not list in /proc/filesystems is a skip:
# mounting it could load a module.  Exit: 0 pass, 1 fail, 77 skip.
set -u
FW=$(realpath "$1")
REBUILD=$(realpath "$2")
FS=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
PROG=
if [ $# -gt 0 ]; then
	PROG=$(realpath "$1")
	shift
fi
# run_cases DIR [ARGS...]: the workloads, or PROGRAM, in DIR
run_cases() {
	d=$1
	shift
	if [ -n "$PROG" ]; then
		"$PROG" "$FW" "$REBUILD" "$d" "$@"
	else
		sh "$here/cases.sh" "$FW" "$REBUILD" "$d"
	fi
}
skip() { echo "SKIP: $FS: $*"; exit 77; }

if [ "$(id -u)" != 0 ]; then
	[ "$FS" = tmpfs ] || skip "making and mounting a $FS image needs root"
	for d in "${XDG_RUNTIME_DIR:-}" /dev/shm /tmp; do
		[ -n "$d" ] && [ "$(stat -f -c %T "$d" 2>/dev/null)" = tmpfs ] &&
			B=$(mktemp -d "$d/fw-rebuild.XXXXXX") && break
	done
	[ -n "${B:-}" ] || skip "no writable tmpfs directory"
	run_cases "$B" "$@"
	rc=$?
	rm -rf "$B"
	exit $rc
fi

grep -qw "$FS" /proc/filesystems || skip "not in /proc/filesystems on $(uname -r) (mounting it could load a module)"
M=$(mktemp -d /tmp/fw-rebuild-$FS.XXXXXX) || exit 1
IMG= LOOP=
cleanup() {
	cd /
	mountpoint -q "$M" && umount "$M"
	[ -n "$LOOP" ] && losetup -d "$LOOP"
	[ -n "$IMG" ] && rm -f "$IMG"
	rmdir "$M"
}
trap cleanup EXIT
if [ "$FS" = tmpfs ]; then
	mount -t tmpfs -o size=512m fw-rebuild "$M" || skip "cannot mount a tmpfs"
else
	case $FS in ext4) pkg=e2fsprogs ;; btrfs) pkg=btrfs-progs ;; *) pkg=${FS}progs ;; esac
	command -v "mkfs.$FS" > /dev/null || skip "no mkfs.$FS (Debian: apt-get install $pkg)"
	command -v losetup > /dev/null || skip "no losetup"
	[ -e /dev/loop-control ] || skip "no /dev/loop-control"
	IMG=$(mktemp /var/tmp/fw-rebuild-$FS.XXXXXX) || exit 1
	truncate -s 320M "$IMG"
	"mkfs.$FS" -q "$IMG" > /dev/null 2>&1 || mkfs."$FS" "$IMG" > /dev/null 2>&1 ||
		skip "mkfs.$FS failed"
	LOOP=$(losetup -f --show "$IMG" 2>/dev/null) || { LOOP=; skip "no free loop device"; }
	mount -t "$FS" "$LOOP" "$M" || skip "cannot mount $FS from $LOOP"
fi
chown 65534:65534 "$M"
chmod 755 "$M"
cd "$M" || exit 1
if [ -n "$PROG" ]; then
	setpriv --reuid=65534 --regid=65534 --clear-groups "$PROG" "$FW" "$REBUILD" "$M" "$@"
else
	setpriv --reuid=65534 --regid=65534 --clear-groups sh "$here/cases.sh" "$FW" "$REBUILD" "$M"
fi
