#!/bin/sh
# --exec: the last run sees every file's final content.  An edit made
# while the command runs and undone before it ends (v2 -> v3 -> v2) looks,
# by its result, like the command rewriting the same bytes, yet the run
# may have read v3: it leads to exactly one more run.  Several files: one
# undone, one edited, one saved unchanged (the run saw its content).
. "$(dirname "$0")/lib.sh"
is_fanwatch || exit 77
mkdir d
echo v1 > d/f
echo g1 > d/g
echo h1 > d/h
# Each run logs "start", then at gate "r" reads the files, then ends at
# gate "e"; the gates are outside the watched tree.
start_watch --postpone --settle 50 --exec 'echo start >> log
	while [ ! -e r ]; do sleep 0.02; done; rm r
	cat d/f d/g > seen; echo read >> log
	while [ ! -e e ]; do sleep 0.02; done; rm e; echo end >> log' d </dev/null
nruns() { grep -c start log 2>/dev/null || echo 0; }
nends() { grep -c end log 2>/dev/null || echo 0; }
# until the run count is $1 and the log's last line is $2
wait_log() {
	n=0
	while { [ "$(nruns)" != "$1" ] || [ "$(tail -n 1 log 2>/dev/null)" != "$2" ]; } &&
		[ $n -lt 200 ]; do sleep 0.05; n=$((n + 1)); done
	[ "$(nruns)" = "$1" ] && [ "$(tail -n 1 log)" = "$2" ] ||
		fail "wanted run $1 at '$2': $(tr '\n' ' ' < log)"
}
# read FILE...: until fanwatch has read each file since it was written
# (its fingerprint; nothing else reads them then), seen by the access
# time (relatime: the first read after a write moves it); an edit and
# its undo are that far apart when a person makes them.
atime_moves() {
	echo x > probe; sleep 0.01; cat probe > /dev/null
	[ "$(stat -c '%X%x' probe)" != "$(stat -c '%Y%y' probe)" ]
}
read_since_written() {
	for f in "$@"; do
		n=0
		# bounded; a watcher that never reads it fails below, by
		# what the runs saw
		while ! stat -c '%.9X %.9Y' "$f" | awk '{ exit !($1 >= $2) }' && [ $n -lt 100 ]; do
			sleep 0.05; n=$((n + 1))
		done
	done
}
atime_moves || { echo "no access times here (noatime?)" >&2; exit 77; }
echo v2 > d/f					# run 1, for v2
wait_log 1 start
echo v3 > d/f; read_since_written d/f		# edited during run 1
: > r; wait_log 1 read; : > e
wait_log 2 start				# run 2 for v3 ...
echo v3 > d/f; read_since_written d/f		# ... saved unchanged: seen
echo v4 > d/f; read_since_written d/f		# ... edited, read, undone
: > r; wait_log 2 read
echo v3 > d/f; read_since_written d/f
: > e
wait_log 3 start				# run 3, for the undo
: > r; wait_log 3 read; : > e; wait_log 3 end
printf 'v3\ng1\n' | cmp -s - seen || fail "run 3 saw $(cat seen)"
# several files in one run: f edited and undone, g edited, h saved unchanged
echo v5 > d/f
wait_log 4 start
echo v6 > d/f; echo g2 > d/g; echo h1 > d/h; read_since_written d/f d/g d/h
: > r; wait_log 4 read
echo v5 > d/f; read_since_written d/f
: > e
wait_log 5 start
: > r; wait_log 5 read; : > e; wait_log 5 end
printf 'v5\ng2\n' | cmp -s - seen || fail "run 5 saw $(cat seen)"
sleep 0.5
[ "$(nruns)" = 5 ] || fail "$(nruns) runs, not 5: $(tr '\n' ' ' < log)"
exit 0
