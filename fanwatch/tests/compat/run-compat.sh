#!/bin/sh
# Run every compatibility case against each watcher given, as a normal
# user (uid 65534 when run as root), and print one row per case:
#   fanwatch/tests/compat/run-compat.sh /usr/bin/inotifywait build/fanwatch/fanwatch
# Exit status: 0 if the last watcher passed (or skipped) every case.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tools=
for t in "$@"; do
	p=$(command -v "$t" 2>/dev/null || true)
	[ -n "$p" ] || { echo "run-compat.sh: no $t" >&2; exit 1; }
	case $p in /*) ;; *) p=$(pwd)/$p ;; esac
	tools="$tools $p"
done
as_user() {
	if [ "$(id -u)" = 0 ]; then
		setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
	else
		"$@"
	fi
}
printf '%-34s' case
for t in $tools; do printf ' %-12s' "$(basename "$t")"; done
echo
last_failed=0
total=0
for c in "$here"/*.t; do
	printf '%-34s' "$(basename "$c" .t)"
	total=$((total + 1))
	for t in $tools; do
		as_user sh "$c" "$t" 2>"/tmp/fwcompat-$(basename "$c").$(basename "$t").log"
		rc=$?
		case $rc in
		0) r=pass ;;
		77) r=skip ;;
		*) r=FAIL ;;
		esac
		printf ' %-12s' "$r"
		[ "$t" = "${tools##* }" ] && [ "$r" = FAIL ] && last_failed=$((last_failed + 1))
	done
	echo
done
echo "cases: $total; failed by the last watcher: $last_failed (logs in /tmp/fwcompat-*.log)"
[ "$last_failed" = 0 ]
