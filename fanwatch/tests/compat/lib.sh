# Shared by the compatibility cases: each case runs one behaviour against
# the watcher given as $1 (inotifywait or fanwatch) and exits 0 (pass),
# 1 (fail) or 77 (skip). Modelled on inotify-tools' t/*.t, written anew.
set -u
TOOL=$1
TOOLNAME=$(basename "$TOOL")
T=$(mktemp -d /tmp/fwcompat.XXXXXX) || exit 1
cd "$T" || exit 1
WPID=
cleanup() {
	[ -n "$WPID" ] && kill "$WPID" 2>/dev/null
	wait 2>/dev/null
	cd /
	rm -rf "$T"
}
trap cleanup EXIT
fail() {
	echo "FAIL($TOOLNAME): $*" >&2
	[ -f out ] && sed 's/^/  out: /' out >&2
	[ -f err ] && sed 's/^/  err: /' err >&2
	exit 1
}
# start_watch ARGS...: the watcher in the background, until it is ready.
start_watch() {
	"$TOOL" "$@" >out 2>err &
	WPID=$!
	i=0
	while ! grep -q "Watches established" err 2>/dev/null; do
		kill -0 "$WPID" 2>/dev/null || return 0
		i=$((i + 1))
		[ $i -gt 400 ] && fail "never ready"
		sleep 0.05
	done
}
# start_quiet ARGS...: for -q runs, which print no banner.
start_quiet() {
	"$TOOL" "$@" >out 2>err &
	WPID=$!
	sleep 1
}
# wait_for PATTERN [FILE]: until grep -E finds it (10 s at most).
wait_for() {
	i=0
	while ! grep -Eq -- "$1" "${2:-out}" 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt 200 ] && return 1
		sleep 0.05
	done
}
stop_watch() {
	[ -n "$WPID" ] && kill "$WPID" 2>/dev/null
	wait "$WPID" 2>/dev/null
	WPID=
}
is_fanwatch() { [ "$TOOLNAME" = fanwatch ]; }
