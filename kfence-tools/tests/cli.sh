#!/bin/sh
# kfence-report's command line: clear errors and exit codes for bad input,
# and the same reports from a file, from standard input and as JSON.
# Usage: cli.sh KFENCE-REPORT DATA-DIR (prints TAP)
kr=$1 data=$2
n=0 failed=0

check() {
	n=$((n + 1))
	if [ "$1" = "$2" ]; then
		echo "ok $n - $3"
	else
		echo "not ok $n - $3 (got '$1', want '$2')"
		failed=1
	fi
}

echo "1..9"
"$kr" /nonexistent/kfence.log >/dev/null 2>/tmp/kfr-err.$$
check "$?" 1 "a missing file exits 1"
grep -q "cannot open '/nonexistent/kfence.log': No such file" /tmp/kfr-err.$$
check "$?" 0 "and names the file and the reason"
"$kr" --no-such-option >/dev/null 2>/tmp/kfr-err.$$
check "$?" 2 "an unknown option exits 2"
grep -q -- "--help" /tmp/kfr-err.$$
check "$?" 0 "and points to --help"
"$kr" --follow "$data/drill-dmesg.log" >/dev/null 2>&1
check "$?" 2 "--follow without --kmsg is a usage error"
check "$("$kr" --brief "$data/drill-dmesg.log" | wc -l)" 7 "seven drill reports from a file"
check "$("$kr" --brief <"$data/drill-kmsg.log" | wc -l)" 7 "seven from /dev/kmsg records on stdin"
check "$("$kr" --json "$data/kunit-dmesg.log" | grep -c '^{"schema":2,"kind":')" 23 \
	"one JSON line per KUnit report"
printf 'BUG: KFENCE: use-after-free read in f+0x1/0x2\n' | "$kr" --brief >/tmp/kfr-out.$$
check "$(cat /tmp/kfr-out.$$)" "- use-after-free read f - - incomplete:truncated KFENCE: use-after-free read in f" \
	"a report cut after its title is still printed, as incomplete"
rm -f /tmp/kfr-err.$$ /tmp/kfr-out.$$
exit $failed
