# shellcheck shell=bash
# Shared by the vm/ scripts: messages, package installs, the cache and its lock.
#
# Environment:
#   K513_CACHE   where kernel trees and builds are cached (outside the repo)
#   K513_KERNEL  which linux-source tree to use: 6.1 (default) or 6.12
#   K513_ARCH    the guest's architecture: x86_64 (default) or arm64
#   K513_VARIANT a kernel variant: extra fragments from
#                kernel-patches/config/variants/NAME/ (default: none)
#   K513_BUILD   per-checkout outputs: initramfs, serial logs (default build/vm)

K513_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
K513_CACHE=${K513_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/k513}
K513_KERNEL=${K513_KERNEL:-6.1}
K513_ARCH=${K513_ARCH:-x86_64}
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
	# tests/install-order: which packages were asserted, and when.
	[ -z "${K513_AUDIT:-}" ] || printf 'assert %s %s\n' "$PROG" "$*" >>"$K513_AUDIT"
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] ||
		die "missing packages: ${missing[*]}; run as root or install them with apt-get"
	mkdir -p "$K513_CACHE"
	say "installing ${missing[*]}"
	local t0=$SECONDS
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends "${missing[@]}" >"$K513_CACHE/apt.log" 2>&1; then
		# A fresh machine may have no package lists yet.
		DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$K513_CACHE/apt.log" 2>&1 || true
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends "${missing[@]}" >>"$K513_CACHE/apt.log" 2>&1 ||
			die "apt-get could not install ${missing[*]}: $(tail -n 1 "$K513_CACHE/apt.log")" \
				"(full log: $K513_CACHE/apt.log)"
	fi
	[ -z "${K513_AUDIT:-}" ] || printf 'installed %s %s\n' "$PROG" "${missing[*]}" >>"$K513_AUDIT"
	# what this run paid for installs (tests/run-all's cold projection)
	[ -z "${K513_INSTALLED:-}" ] ||
		printf '%s %s\n' "$((SECONDS - t0))" "${missing[*]}" >>"$K513_INSTALLED"
}

# What an empty cache would cost. Whatever is made once and kept in the
# cache (a kernel build, an unpacked tree, a chroot, a sysroot, the packages
# apt installed) records the seconds it took to make; a run that finds it
# made notes that cost in the ledger tests/run-all keeps (K513_LEDGER, one
# "KEY SECONDS" line per use; the first line of a key counts), so a warm run
# can project what the same run costs on a fresh machine.
# cost_made FILE SECONDS: record what making a cached thing took.
cost_made() { echo "$2" >"$1"; }
# cost_note KEY FILE DEFAULT: the thing behind KEY was reused: its recorded
# cost (DEFAULT where it predates the records) goes to the ledger.
cost_note() {
	local c
	[ -n "${K513_LEDGER:-}" ] || return 0
	c=$(cat "$2" 2>/dev/null) || c=$3
	printf '%s %s\n' "$1" "${c:-$3}" >>"$K513_LEDGER"
}
# cost_new KEY: made in this run, so its cost is in the run's own time.
cost_new() { [ -z "${K513_LEDGER:-}" ] || printf '%s 0\n' "$1" >>"$K513_LEDGER"; }

# Packages every part of the pipeline needs.
# shellcheck disable=SC2034 # used by the scripts that source this file
# clang and libclang-rt-dev: the libFuzzer run of lm's frame parser (clang
# only recommends the runtime); gnuplot: lm --plot and the benchmark plots;
# libsodium-dev: lm's key handshake (the guest gets libsodium.so via ldd).
# python3: lm-qemu-anchor, the QMP driver (standard library only).
# git, rsync, xfsprogs, btrfs-progs: fanwatch's rebuild-the-tree tests
# (workloads, and the xfs/btrfs loop images; a missing one is a skip).
# busybox-static: tests/vm/results-parser.sh checks the guest's awk (busybox).
K513_HOST_PACKAGES=(build-essential pkg-config meson ninja-build libcmocka-dev jq
	scdoc inotify-tools clang libclang-rt-dev gnuplot-nox abigail-tools libsodium-dev
	python3 git rsync xfsprogs btrfs-progs busybox-static)
# Building a kernel tree, and modules against it (plus the tree's
# linux-source package and, for a foreign guest, CROSS_PACKAGES).
# shellcheck disable=SC2034
K513_KERNEL_PACKAGES=(build-essential bc bison flex libelf-dev libssl-dev cpio xz-utils
	kmod rsync perl)
# Packing the initramfs: busybox, the archive, the tests' list, readelf.
# shellcheck disable=SC2034
K513_INITRAMFS_PACKAGES=(busybox-static cpio jq binutils)

# Checking the Debian packages (tests/debian/run): the build itself runs in
# a chroot that installs the Build-Depends read from debian/control.
# shellcheck disable=SC2034
K513_DEB_PACKAGES=(lintian mmdebstrap)

# The guest architectures: everything that differs between them is set here.
K513_ARCHES="x86_64 arm64"
# Refuse an unknown architecture; set, for the one chosen:
#   KARCH          the kernel's ARCH= name
#   CROSS_COMPILE  the toolchain prefix (empty for the host's own arch)
#   IMAGE_TARGET   the make target that builds the bootable image, IMAGE_FILE
#                  where it lands under arch/$KARCH/boot/
#   QEMU QEMU_PKG  the system emulator and its Debian package
#   QEMU_MACHINE   its machine and CPU options; GUEST_CONSOLE the console;
#                  QEMU_NIC the virtio-net device model (PCI, or virtio-mmio)
#   ELF_MACHINE    what readelf -h prints as "Machine:" for its programs
#   GUEST_LIBDIR   the multiarch library directory in the guest
#   CROSS_PACKAGES what a cross build needs on top of the kernel packages
check_arch() {
	case $K513_ARCH in
	x86_64)
		KARCH=x86 CROSS_COMPILE='' IMAGE_TARGET=bzImage IMAGE_FILE=bzImage
		QEMU=qemu-system-x86_64 QEMU_PKG=qemu-system-x86
		QEMU_MACHINE=(-cpu max) GUEST_CONSOLE=ttyS0 QEMU_NIC=virtio-net-pci
		ELF_MACHINE='Advanced Micro Devices X86-64' GUEST_LIBDIR=x86_64-linux-gnu
		CROSS_PACKAGES=() ;;
	arm64)
		# -M virt needs no firmware for -kernel; its PL011 is ttyAMA0
		# and PSCI turns "reboot -f" into QEMU's exit.
		KARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- IMAGE_TARGET=Image IMAGE_FILE=Image
		QEMU=qemu-system-aarch64 QEMU_PKG=qemu-system-arm
		QEMU_MACHINE=(-M virt -cpu max) GUEST_CONSOLE=ttyAMA0 QEMU_NIC=virtio-net-device
		ELF_MACHINE=AArch64 GUEST_LIBDIR=aarch64-linux-gnu
		CROSS_PACKAGES=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu) ;;
	aarch64) K513_ARCH=arm64; check_arch; return ;;
	*) die "unknown architecture '$K513_ARCH': choose one of: $K513_ARCHES" ;;
	esac
	# shellcheck disable=SC2034 # used by the scripts that source this file
	: "${KARCH}" "${CROSS_COMPILE}" "${IMAGE_TARGET}" "${IMAGE_FILE}" "${QEMU}" "${QEMU_PKG}" \
		"${GUEST_CONSOLE}" "${ELF_MACHINE}" "${GUEST_LIBDIR}" "${QEMU_MACHINE[@]}" "${QEMU_NIC}" \
		"${CROSS_PACKAGES[@]}"
	export K513_ARCH
}

# What each step of the pipeline uses: the one table every entry point
# draws from. Each step asserts its own packages (need_step) before it first
# uses any of them, so no step relies on another having run before it (the
# arm64 project build once ran before the kernel build that installed the
# cross compiler). tests/install-order checks, on every tests/run-all, that
# nothing outside Debian's required and important packages ran before some
# step had asserted it.
#   project    configure and build the project (meson_setup) for the guest's
#              architecture: the host tools, plus the cross toolchain
#   kernel     unpack, configure and build the linux-source tree
#   modules    build our modules against a built tree
#   initramfs  pack the guest's initramfs
#   guest      boot it in QEMU
#   debs       build and check the Debian packages in clean chroots
# Needs K513_ARCH checked (check_arch) and, for kernel, K513_KERNEL.
step_packages() {
	case $1 in
	project) echo "${K513_HOST_PACKAGES[*]} ${CROSS_PACKAGES[*]:-}" ;;
	kernel) echo "linux-source-$K513_KERNEL ${K513_KERNEL_PACKAGES[*]} ${CROSS_PACKAGES[*]:-}" ;;
	modules) echo "${K513_KERNEL_PACKAGES[*]} ${CROSS_PACKAGES[*]:-}" ;;
	initramfs) echo "${K513_INITRAMFS_PACKAGES[*]}" ;;
	guest) echo "$QEMU_PKG" ;;
	debs) echo "${K513_DEB_PACKAGES[*]}" ;;
	*) die "internal: no step '$1' in step_packages" ;;
	esac
}

# need_step STEP: install what STEP uses, before it uses any of it.
need_step() {
	local pkgs
	read -ra pkgs <<<"$(step_packages "$1")"
	need_packages "${pkgs[@]}"
}

# Is this a cross build (the guest's arch is not the machine's)?
is_cross() { [ "$K513_ARCH" != "$(uname -m | sed 's/^aarch64$/arm64/')" ]; }

# The cmocka and busybox of a foreign architecture, from Debian's packages of
# that architecture, unpacked (never installed: busybox-static:arm64 would
# replace the host's) into a sysroot in the cache. Prints the sysroot.
# apt runs with its own lists and status in the cache, so the host's dpkg
# architectures and package state are left alone.
# libsodium: lm's handshake. The sysroot is cached by its package list.
K513_SYSROOT_PACKAGES=(busybox-static libcmocka0 libcmocka-dev libsodium23 libsodium-dev)
foreign_sysroot() {
	local arch=$1 dir apt deb p
	dir=$K513_CACHE/sysroot/$arch-$(echo "${K513_SYSROOT_PACKAGES[*]}" | sha256sum | cut -c1-12)
	if [ -e "$dir/.complete" ]; then
		cost_note "sysroot:${dir##*/}" "$dir/cost" 15
		echo "$dir/root"
		return 0
	fi
	local t0=$SECONDS
	[ "$(id -u)" -eq 0 ] ||
		die "the $arch sysroot ($dir) is not there yet: run once as root to fetch" \
			"${K513_SYSROOT_PACKAGES[*]} for $arch"
	rm -rf "$dir"
	mkdir -p "$dir/lists/partial" "$dir/archives/partial" "$dir/debs" "$dir/root"
	: >"$dir/status"
	apt=(apt-get -q -o "Dir::State::Lists=$dir/lists" -o "Dir::State::status=$dir/status"
		-o "Dir::Cache=$dir" -o "Dir::Cache::archives=$dir/archives"
		-o "APT::Architecture=$arch" -o "APT::Architectures::=$arch"
		-o APT::Sandbox::User=root)
	say "fetching ${K513_SYSROOT_PACKAGES[*]} for $arch into $dir"
	"${apt[@]}" update >"$dir/apt.log" 2>&1 ||
		die "apt-get update for $arch failed: $(tail -n 1 "$dir/apt.log") (log: $dir/apt.log)"
	(cd "$dir/debs" && "${apt[@]}" download "${K513_SYSROOT_PACKAGES[@]/%/:$arch}") \
		>>"$dir/apt.log" 2>&1 ||
		die "apt-get download for $arch failed: $(tail -n 1 "$dir/apt.log") (log: $dir/apt.log)"
	for p in "${K513_SYSROOT_PACKAGES[@]}"; do
		deb=$(find "$dir/debs" -name "${p}_*_$arch.deb" | head -n 1)
		[ -n "$deb" ] || die "apt-get download did not fetch $p:$arch (log: $dir/apt.log)"
		dpkg-deb -x "$deb" "$dir/root"
	done
	rm -rf "$dir/lists" "$dir/archives"
	cost_made "$dir/cost" "$((SECONDS - t0))"
	cost_new "sysroot:${dir##*/}"
	touch "$dir/.complete"
	echo "$dir/root"
}

# meson_setup DIR [OPTION...]: configure the project in DIR for the guest's
# architecture (a cross file for a foreign one), reconfiguring an existing
# build. A cross build runs no test on the host (no exe wrapper: qemu-user
# has no userfaultfd); its tests run in the guest.
meson_setup() {
	local dir=$1 sysroot cross=()
	shift
	need_step project
	if is_cross; then
		sysroot=$(foreign_sysroot "$K513_ARCH")
		mkdir -p "$dir.cross"
		cat >"$dir.cross/sysroot.ini" <<-EOF
		# generated by vm/lib/common.sh: where the $K513_ARCH cmocka is
		[properties]
		sys_root = '$sysroot'
		pkg_config_libdir = '$sysroot/usr/lib/$GUEST_LIBDIR/pkgconfig'
		EOF
		cross=(--cross-file "$K513_ROOT/vm/cross/$K513_ARCH.ini" --cross-file "$dir.cross/sysroot.ini")
	fi
	if [ -f "$dir/build.ninja" ]; then
		meson setup --reconfigure "$@" "${cross[@]}" "$dir" "$K513_ROOT" >/dev/null
	else
		meson setup "$@" "${cross[@]}" "$dir" "$K513_ROOT" >/dev/null
	fi
}

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

# A variant may name the trees it exists for in a file TREES in its
# directory (one word each, e.g. "6.1"): refuse it on any other tree.
check_variant_tree() {
	local f=$K513_ROOT/kernel-patches/config/variants/$K513_VARIANT/TREES why
	[ -n "$K513_VARIANT" ] && [ -f "$f" ] || return 0
	grep -v '^#' "$f" | tr -s ' \t' '\n' | grep -qxF "$K513_KERNEL" && return 0
	why=$(sed -n 's/^# *//p' "$f" | paste -sd' ' -)
	die "the kernel variant '$K513_VARIANT' exists only for the trees" \
		"$(grep -v '^#' "$f" | paste -sd' ' -), not $K513_KERNEL${why:+: $why}"
}

# The suffix that names a kernel's outputs in $K513_BUILD: empty for the
# plain x86_64 6.1 kernel (serial-test.log), else e.g. -kasan, -arm64,
# -6.12, -slab-arm64.
leg_suffix() {
	printf '%s' "${K513_VARIANT:+-$K513_VARIANT}"
	[ "$K513_ARCH" = x86_64 ] || printf -- '-%s' "$K513_ARCH"
	[ "$K513_KERNEL" = 6.1 ] || printf -- '-%s' "$K513_KERNEL"
}
