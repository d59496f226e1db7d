#!/bin/sh
# The rebuild-the-tree cases, run as a normal user in a fresh directory:
#   cases.sh FANWATCH FW_REBUILD DIR
# Each workload runs three times: with the watcher running; with it
# stopped (SIGSTOP) for the whole workload, so every directory's CREATE is
# read after the directory was filled, renamed or removed, and a reused
# name has come back: the hard path every time, not when the timing
# happens to; and stopped again with --unpaired-renames (the kernel's
# MOVED_FROM/MOVED_TO, the 5.13-5.16 path) and a 4-descriptor cache.
# After it, the tree fw-rebuild makes from the stream must equal find's,
# path by path.  One line per case; exit 1 if any case differs.
set -u
FW=$1
REBUILD=$2
BASE=$3
N=${FW_REBUILD_ITER:-60}	# iterations of the loop workloads
export LC_ALL=C
HOME=$BASE/home
export HOME GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME" || exit 1
failed=0

# find's view: NUL-terminated, relative, directories with a trailing '/'.
listing() {
	(cd "$1" && find . -mindepth 1 \( -type d -printf '%P/\0' -o -printf '%P\0' \)) |
		sort -z
}

# wait_stream FILE PATTERN: until the stream holds PATTERN; gives up only
# when the stream stops growing for 20 s (a limit that follows progress).
wait_stream() {
	last=-1 still=0
	while ! grep -qzF -- "$2" "$1"; do
		size=$(wc -c < "$1")
		if [ "$size" = "$last" ]; then
			still=$((still + 1))
			[ $still -gt 400 ] && return 1
		else
			still=0 last=$size
		fi
		sleep 0.05
	done
}

# run_case NAME MODE PREPARE WORKLOAD: PREPARE builds the starting tree
# (before the watch), WORKLOAD changes it while watched.
run_case() {
	name=$1 mode=$2
	C=$BASE/$name.$mode
	rm -rf "$C"
	mkdir -p "$C/w" && cd "$C" || return 1
	$3 || { echo "$name $mode: cannot prepare"; failed=1; return; }
	listing w > initial
	: > err
	unpaired=
	[ "$mode" = stopped-unpaired ] && unpaired=--unpaired-renames
	FANWATCH_FD_CACHE=${unpaired:+4} "$FW" $unpaired -m -r -e create -e delete -e move -e delete_self --no-newline \
		--format '%e|%c|%w%f%0' w > stream 2> err &
	fwpid=$!
	i=0
	while ! grep -q "Watches established" err; do
		i=$((i + 1))
		if [ $i -gt 600 ] || ! kill -0 $fwpid 2>/dev/null; then
			echo "$name $mode: the watcher never got ready: $(cat err)"
			failed=1
			return
		fi
		sleep 0.05
	done
	[ "$mode" != running ] && kill -STOP $fwpid
	$4 > workload.log 2>&1 || { echo "$name $mode: workload failed: $(tail -3 workload.log)"; failed=1; }
	[ "$mode" != running ] && kill -CONT $fwpid
	: > w/.fw-end
	if ! wait_stream stream "|w/.fw-end"; then
		echo "$name $mode: the stream stopped before the end marker"
		failed=1
	fi
	kill $fwpid
	wait $fwpid 2>/dev/null
	"$REBUILD" w/ initial < stream > rebuilt 2> rebuild.err || {
		echo "$name $mode: $(cat rebuild.err)"; failed=1; }
	listing w > found
	missing=$(comm -z -13 rebuilt found | tr -cd '\0' | wc -c)
	invented=$(comm -z -23 rebuilt found | tr -cd '\0' | wc -c)
	total=$(tr -cd '\0' < found | wc -c)
	if [ "$missing" = 0 ] && [ "$invented" = 0 ]; then
		echo "$name $mode: ok ($total paths)"
		cd "$BASE" && rm -rf "$C"
		return
	fi
	failed=1
	echo "$name $mode: FAIL: $missing of $total paths missing, $invented invented (kept in $C)"
	comm -z -13 rebuilt found | tr '\0' '\n' | head -3 | sed 's/^/  missing: /'
	comm -z -23 rebuilt found | tr '\0' '\n' | head -3 | sed 's/^/  invented: /'
	grep -q . err && sed 's/^/  fanwatch: /' err | grep -v "Setting up\|Watches est" | head -3
}

nothing() { :; }

# Build in a temporary directory, then rename it into place; the last
# build is left unfinished, so a reused name is there when a stopped
# watcher reads the first CREATE.
publish() {
	i=0
	while [ $i -le $N ]; do
		t=w/.tmp
		[ "$1" = unique ] && t=w/.tmp$i
		mkdir "$t" "$t/sub" || return 1
		for k in 0 1 2 3; do : > "$t/f${i}_$k"; done
		: > "$t/sub/g$i"
		[ $i = $N ] || mv "$t" "w/final$i" || return 1
		i=$((i + 1))
	done
}
tmp_unique() { publish unique; }
tmp_reused() { publish ""; }

# One directory name, made, filled and removed again and again; the last
# one stays.
name_loop() {
	i=0
	while [ $i -lt $N ]; do
		rm -rf w/d
		mkdir w/d w/d/s || return 1
		: > w/d/f$i; : > w/d/g$i; : > w/d/s/h$i
		i=$((i + 1))
	done
}

# Two trees that differ by moved, removed and added directories.
make_src() {
	for r in 1 2; do
		for i in 0 1 2 3 4 5 6 7; do
			if [ $r = 1 ] || [ $((i % 3)) != 0 ]; then
				d=src$r/a$i/b$((i % 2))
			else
				d=src$r/moved/a$i
			fi
			mkdir -p "$d/c" || return 1
			echo "$r $i" > "$d/file$r"
			echo "$i" > "$d/c/same"
		done
	done
}
rsync_delete() {
	for r in 1 2 1 2 1 2; do
		rsync -a --delete "src$r/" w/dst/ || return 1
	done
}

# A hard-linked copy, then the original deleted with find -delete.
make_linked() {
	mkdir -p w/t0 && for i in 0 1 2 3 4 5; do
		mkdir -p "w/t0/d$i/e" && : > "w/t0/d$i/f" && : > "w/t0/d$i/e/g" || return 1
	done
}
cp_al_delete() {
	for r in 1 2 3 4 5 6; do
		cp -al "w/t$((r - 1))" "w/t$r" && find "w/t$((r - 1))" -delete || return 1
	done
}

# Two branches whose directories move; checkout between them.
make_repo() {
	command -v git > /dev/null || return 1
	cd w && git init -q -b one . && git config user.email t@t && git config user.name t &&
	for i in 0 1 2 3 4 5 6 7 8 9; do
		mkdir -p "top/d$i/inner" && echo "$i" > "top/d$i/f" && echo "$i" > "top/d$i/inner/g"
	done && git add -A && git commit -qm one && git checkout -qb two &&
	for i in 0 1 2 3 4 5 6 7 8 9; do
		mkdir -p "moved/m$((i % 3))" && git mv "top/d$i" "moved/m$((i % 3))/d$i"
	done && git commit -qm two && git checkout -q one
	r=$?
	cd ..
	return $r
}
git_checkout() {
	for b in two one two one two one; do
		git -C w checkout -q "$b" || return 1
	done
}

# A chain deeper than PATH_MAX: 900 levels watched from the start, then
# populated chains moved in below it (built outside and joined by mv: no
# path given to a system call may exceed PATH_MAX), the whole renamed and
# a part removed.  Setup, adoption, relabeling and removal were a stack
# frame (~11 KB in setup) a level.
D900=$(i=0; while [ $i -lt 900 ]; do printf d/; i=$((i + 1)); done)
# chain DIR N: DIR/d/.../d, N levels, a file at every 100th and the last
chain() {
	c=$1 i=0
	while [ $i -lt $2 ]; do
		c=$c/d i=$((i + 1))
		if [ $((i % 100)) = 0 ]; then
			mkdir -p "$c" && : > "$c/f$i" || return 1
		fi
	done
	mkdir -p "$c" && : > "$c/end"
}
make_deep() { chain w/a 900; }
deep_chain() {
	mkdir o && chain o/b 900 && chain o/c 900 && chain o/c2 900 &&
	mv o/c2 "o/c/$D900" && mv o/c "w/a/$D900" && mv o/b "w/a/$D900" &&
	mv w/a w/z && rm -rf "w/z/${D900}b/d"
}

for mode in running stopped stopped-unpaired; do
	run_case tmp-unique $mode nothing tmp_unique
	run_case tmp-reused $mode nothing tmp_reused
	run_case name-loop $mode nothing name_loop
	if command -v rsync > /dev/null; then
		run_case rsync-delete $mode make_src rsync_delete
	else
		echo "rsync-delete $mode: SKIP: no rsync"
	fi
	run_case cp-al-find-delete $mode make_linked cp_al_delete
	run_case deep-chain $mode make_deep deep_chain
	if command -v git > /dev/null; then
		run_case git-checkout $mode make_repo git_checkout
	else
		echo "git-checkout $mode: SKIP: no git"
	fi
done
exit $failed
