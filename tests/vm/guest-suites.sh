#!/bin/sh
# Which tests rerun in the guests (issue 32): a test reruns on a guest
# kernel when its outcome can depend on that kernel, and only then.
#
# A test reaches a kernel interface when its program, or a program of this
# build it is given as an argument, links libuffdminor (whose every call is
# userfaultfd's) or calls one of the kernel-facing functions in KERNEL_FNS
# itself. Such a test must be in a guest suite ('guest', or
# 'guest-ARCH[-TREE]' / 'guest-TREE' for the legs where it proves something
# new: vm/build-initramfs) or be listed in tests/vm/host-only.txt with the
# reason the kernel does not change its outcome. A test in a guest suite
# that reaches no kernel interface proves nothing new there and fails too,
# as does a stale line of host-only.txt.
# usage: guest-suites.sh BUILD-DIR
set -u
build=$(cd "${1:?usage: guest-suites.sh BUILD-DIR}" && pwd) || exit 1
list=$(cd "$(dirname "$0")" && pwd)/host-only.txt
KERNEL_FNS='syscall ioctl mmap mmap64 mprotect madvise process_madvise memfd_create
fallocate fallocate64 fanotify_init fanotify_mark inotify_init1 name_to_handle_at
open_by_handle_at userfaultfd klogctl unshare mount'
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# reaches FILE: FILE is an ELF program of this build that reaches the kernel
# (meson gives the build's own files relative to the build directory)
reaches() {
	f=$1
	case $f in "$build"/*) ;; /*) return 1 ;; *) f=$build/$f ;; esac
	[ -f "$f" ] && readelf -h "$f" >/dev/null 2>&1 || return 1
	readelf -d "$f" 2>/dev/null | grep -q 'NEEDED.*\[libuffdminor\.so' && return 0
	nm -D --undefined-only "$f" 2>/dev/null | awk '{ sub(/@.*/, "", $2); print $2 }' |
		grep -qxF "$(echo "$KERNEL_FNS" | tr -s ' ' '\n')"
}

meson introspect "$build" --tests | jq -r '.[] | [.name,
	(.suite | map(sub("^[^:]*:"; "")) | any(test("^guest(-|$)")) | tostring),
	(.cmd | join(" "))] | join("\t")' >"$tmp/tests" || { echo "not ok - meson introspect $build"; exit 1; }
[ -s "$tmp/tests" ] || { echo "not ok - no tests in $build"; exit 1; }
grep -v '^[[:space:]]*\(#\|$\)' "$list" >"$tmp/list"

while IFS="$(printf '\t')" read -r name guest cmd; do
	r=no
	for w in $cmd; do
		if reaches "$w"; then r=yes; break; fi
	done
	listed=$(awk -v n="$name" '$1 == n { $1 = ""; print substr($0, 2) }' "$tmp/list")
	why=''
	if [ "$r" = yes ] && [ "$guest" = false ] && [ -z "$listed" ]; then
		why="reaches a kernel interface but reruns on no guest: give it a guest suite, or list it in tests/vm/host-only.txt with the reason the kernel does not matter"
	elif [ "$r" = no ] && [ "$guest" = true ]; then
		why="is in a guest suite but reaches no kernel interface: it proves nothing new there"
	elif [ -n "$listed" ] && [ "$guest" = true ]; then
		why="is listed host-only (tests/vm/host-only.txt) but is in a guest suite"
	fi
	if [ -z "$why" ]; then
		pass=$((pass + 1))
		echo "ok - $name (kernel: $r, guest: $guest${listed:+, host-only: $listed})"
	else
		fail=$((fail + 1))
		echo "not ok - $name $why"
	fi
done <"$tmp/tests"

# every host-only line names a test there is, and says why
while read -r name reason; do
	if ! cut -f1 "$tmp/tests" | grep -qxF "$name"; then
		fail=$((fail + 1)); echo "not ok - host-only.txt names '$name', which is no test: a stale line"
	elif [ -z "$reason" ]; then
		fail=$((fail + 1)); echo "not ok - host-only.txt gives no reason for '$name'"
	fi
done <"$tmp/list"

echo "guest-suites: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
