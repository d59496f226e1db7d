# shellcheck shell=bash
# Shared by the vm/ scripts: messages, package installs, the cache and its lock.
#
# Environment:
#   K513_CACHE   where kernel trees and builds are cached (outside the repo)
#   K513_KERNEL  which linux-source tree to use: 6.1 (default) or 6.12
#   K513_VARIANT a kernel variant: extra fragments from
#                kernel-patches/config/variants/NAME/ (default: none)
#   K513_BUILD   per-checkout outputs: initramfs, serial logs (default build/vm)

K513_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
K513_CACHE=${K513_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/k513}
K513_KERNEL=${K513_KERNEL:-6.1}
K513_VARIANT=${K513_VARIANT:-}
K513_BUILD=${K513_BUILD:-$K513_ROOT/build/vm}
PROG=${PROG:-$(basename "$0")}

say() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

# Install the Debian packages that are missing; refuse clearly when we
# cannot (not root, or apt cannot find them).
need_packages() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] ||
		die "missing packages: ${missing[*]}; run as root or install them with apt-get"
	mkdir -p "$K513_CACHE"
	say "installing ${missing[*]}"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends "${missing[@]}" >"$K513_CACHE/apt.log" 2>&1; then
		# A fresh machine may have no package lists yet.
		DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$K513_CACHE/apt.log" 2>&1 || true
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends "${missing[@]}" >>"$K513_CACHE/apt.log" 2>&1 ||
			die "apt-get could not install ${missing[*]}: $(tail -n 1 "$K513_CACHE/apt.log")" \
				"(full log: $K513_CACHE/apt.log)"
	fi
}

# Packages every part of the pipeline needs.
# shellcheck disable=SC2034 # used by the scripts that source this file
# clang and libclang-rt-dev: the libFuzzer run of lm's frame parser (clang
# only recommends the runtime); gnuplot: lm --plot and the benchmark plots;
# libsodium-dev: lm's key handshake (the guest gets libsodium.so via ldd).
K513_HOST_PACKAGES=(build-essential pkg-config meson ninja-build libcmocka-dev jq
	scdoc inotify-tools clang libclang-rt-dev gnuplot-nox libsodium-dev)
# shellcheck disable=SC2034
K513_KERNEL_PACKAGES=(bc bison flex libelf-dev libssl-dev cpio xz-utils kmod rsync
	busybox-static qemu-system-x86)

# One kernel build or guest at a time on this machine: they each want every
# core, and two guests would fight over the cache.
# The lock is per machine, not per cache, since the cores are.
K513_LOCK=${K513_LOCK:-/tmp/k513-vm.lock}
take_lock() {
	exec 9>>"$K513_LOCK"
	if ! flock -n 9; then
		say "waiting for another k513 kernel build or guest to finish (lock $K513_LOCK)"
		flock -w 3600 9 || die "gave up waiting for $K513_LOCK after an hour"
	fi
}

# Run a long command with its output in a log, printing a heartbeat so CI
# and users see it is alive; on failure show the log's tail.
run_logged() {
	local what=$1 log=$2 start last now pid rc
	shift 2
	start=$(date +%s)
	last=$start
	"$@" >"$log" 2>&1 &
	pid=$!
	# An interrupted run must not leave the step running (holding the lock
	# and writing into a directory the next run will clean up).
	trap 'kill "$pid" 2>/dev/null; exit 130' INT TERM
	while kill -0 "$pid" 2>/dev/null; do
		sleep 2
		now=$(date +%s)
		if [ $((now - last)) -ge 30 ] && kill -0 "$pid" 2>/dev/null; then
			say "$what: $((now - start)) s, $(grep -c '^ *\(CC\|LD\|AR\)' "$log") objects"
			last=$now
		fi
	done
	rc=0
	wait "$pid" || rc=$?
	trap - INT TERM
	if [ "$rc" -ne 0 ]; then
		tail -n 30 "$log" >&2
		die "$what failed (exit $rc); full log: $log"
	fi
	say "$what: done in $(($(date +%s) - start)) s"
}

# The variants there are: each directory under kernel-patches/config/variants.
k513_variants() {
	find "$K513_ROOT/kernel-patches/config/variants" -mindepth 1 -maxdepth 1 -type d \
		-printf '%f\n' 2>/dev/null | LC_ALL=C sort | paste -sd ' ' -
}

# Refuse a variant that has no fragments, naming the ones there are.
check_variant() {
	[ -z "$K513_VARIANT" ] && return 0
	case $K513_VARIANT in
	*/* | .*) ;;
	*)
		find "$K513_ROOT/kernel-patches/config/variants/$K513_VARIANT" -maxdepth 1 \
			-name '*.config' 2>/dev/null | grep -q . && return 0 ;;
	esac
	die "unknown kernel variant '$K513_VARIANT': choose one of: $(k513_variants)" \
		"(fragments in kernel-patches/config/variants/NAME/)"
}
