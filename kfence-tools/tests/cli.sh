#!/bin/sh
# kfence-report's command line: clear errors and exit codes for every bad
# input the issue lists, the same reports from a file, standard input and
# JSON, and the fleet options (cursor, max-per-boot, summary, stats,
# vmlinux). Usage: cli.sh KFENCE-REPORT DATA-DIR [FAKE-VMLINUX] (prints TAP)
kr=$1 data=$2 fakevm=$3
. "$(dirname "$0")/tap.sh"

# grep_ok PATTERN FILE DESCRIPTION
grep_ok() {
	grep -q -- "$1" "$2"
	check "$?" 0 "$3"
}

"$kr" /nonexistent/kfence.log >/dev/null 2>"$t/err"
check "$?" 1 "a missing file exits 1"
grep_ok "cannot open '/nonexistent/kfence.log': No such file" "$t/err" \
	"and names the file and the reason"
"$kr" --no-such-option >/dev/null 2>"$t/err"
check "$?" 2 "an unknown option exits 2"
grep_ok "--help" "$t/err" "and points to --help"
"$kr" --follow "$data/drill-dmesg.log" "$data/kunit-dmesg.log" >/dev/null 2>&1
check "$?" 2 "--follow without --kmsg wants one file"
"$kr" --cursor "$t/c" "$data/drill-dmesg.log" >/dev/null 2>&1
check "$?" 2 "--cursor without --kmsg is a usage error"
"$kr" --max-per-boot many "$data/drill-dmesg.log" >/dev/null 2>"$t/err"
check "$?" 2 "--max-per-boot wants a count"
check "$("$kr" --brief "$data/drill-dmesg.log" | wc -l)" 7 "seven drill reports from a file"
check "$("$kr" --brief <"$data/drill-kmsg.log" | wc -l)" 7 "seven from /dev/kmsg records on stdin"
check "$("$kr" --json "$data/kunit-dmesg.log" | grep -c '^{"schema":3,"detector":"kfence","kind":')" 23 \
	"one JSON line per KUnit report, each with the schema version"
"$kr" --json "$data/drill-dmesg.log" >/dev/full 2>"$t/err"
check "$?" 1 "a full disk under a file's records (written at the end) exits 1"
grep_ok "writing the output" "$t/err" "and says what failed"
# A pipe may be a live log: each report is written as it comes, not when
# the input ends (a saved file's are written in big blocks).
mkfifo "$t/livefifo"
"$kr" --brief <"$t/livefifo" >"$t/live" &
live=$!
exec 3>"$t/livefifo"
cat "$data/drill-dmesg.log" >&3
i=0
while [ $i -lt 300 ] && [ "$(wc -l <"$t/live")" -lt 7 ]; do
	sleep 0.1
	i=$((i + 1))
done
check "$(wc -l <"$t/live")" 7 "reports from a pipe come out before the pipe ends"
exec 3>&-
wait "$live"
check "$?" 0 "and the pipe's end ends the run"
printf 'BUG: KFENCE: use-after-free read in f+0x1/0x2\n' | "$kr" --brief >"$t/out"
check "$(cat "$t/out")" "- use-after-free read f - - incomplete:truncated" \
	"a report cut after its title is still printed, as incomplete, with the reason"

# Bad input: empty, binary, one 8 MiB line, a report cut mid-stack that
# must not swallow the next file's report.
"$kr" --json </dev/null >"$t/out" 2>&1
check "$?:$(wc -c <"$t/out")" "0:0" "empty input: exit 0, no output"
head -c 1048576 /dev/urandom >"$t/bin"
"$kr" --json "$t/bin" >/dev/null 2>&1
check "$?" 0 "1 MiB of random bytes: exit 0 (whatever it found)"
head -c 8388608 /dev/zero | tr '\0' 'x' >"$t/long"
echo >>"$t/long"
cat "$data/drill-dmesg.log" >>"$t/long"
check "$("$kr" --brief "$t/long" | grep -c ' complete$')" 7 \
	"an 8 MiB line before the reports: all seven still read"
head -n 110 "$data/drill-dmesg.log" >"$t/cut.log"
"$kr" --brief "$t/cut.log" "$data/drill-dmesg.log" >"$t/out"
check "$(grep -c ' complete$' "$t/out"):$(grep -c 'incomplete:truncated$' "$t/out")" "10:1" \
	"a file cut mid-report (3 whole, 1 cut) then a whole file (7): 10 complete, 1 truncated"

# Rotated logs (issue 33): the files of one host are one stream, in order.
# At every line of the drill log, split into syslog.1 and syslog: the two
# files give what the log gives whole, seven complete reports.
lines=$(wc -l <"$data/drill-dmesg.log") k=1 differ=0
"$kr" --json "$data/drill-dmesg.log" | sed 's/,"line":[0-9]*//' >"$t/whole"
while [ "$k" -lt "$lines" ]; do
	head -n "$k" "$data/drill-dmesg.log" >"$t/syslog.1"
	tail -n "+$((k + 1))" "$data/drill-dmesg.log" >"$t/syslog"
	"$kr" --json "$t/syslog.1" "$t/syslog" | sed 's/,"line":[0-9]*//' >"$t/out"
	cmp -s "$t/out" "$t/whole" || differ=$((differ + 1))
	k=$((k + 1))
done
check "$(grep -c '"complete":true' "$t/whole"):$differ" "7:0" \
	"a report split across a rotation at any of $((lines - 1)) lines: as the whole log, 7 complete"
head -n 110 "$data/drill-dmesg.log" >"$t/syslog.1"
tail -n +111 "$data/drill-dmesg.log" >"$t/syslog"
check "$("$kr" --summary "$t/syslog.1" "$t/syslog" | awk 'NR > 1 { n += $2 } END { print n }')" 7 \
	"--summary of the two files: 7 complete"

# --follow FILE (issue 33): a follower reads what is appended, and goes on
# across a rotation (the file renamed to .1, a new one made) as one stream:
# the report split by the rotation comes out whole. SIGTERM ends it.
# wait_for N [FILE]: until N complete records are out (at most 30 s).
wait_for() {
	i=0
	while [ "$(grep -c ' complete$' "${2:-$t/fout}")" -lt "$1" ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}
head -n 60 "$data/drill-dmesg.log" >"$t/follow.log"
"$kr" --brief --follow "$t/follow.log" >"$t/fout" 2>"$t/ferr" &
fpid=$!
wait_for 2
sed -n 61,110p "$data/drill-dmesg.log" >>"$t/follow.log"
wait_for 3
mv "$t/follow.log" "$t/follow.log.1"
tail -n +111 "$data/drill-dmesg.log" >"$t/follow.new"
mv "$t/follow.new" "$t/follow.log"
wait_for 7
kill -TERM "$fpid"
wait "$fpid"
check "$?:$(grep -c ' complete$' "$t/fout"):$(wc -l <"$t/fout")" "0:7:7" \
	"--follow FILE: appended lines, then a rotation inside a report: 7 complete, exit 0 on SIGTERM"
# A followed file that ends in a 2 MB line with no newline (cut at 1 MiB,
# its rest dropped) is rotated: the new file's first line is read, not
# dropped as the rest of that one.
head -c 2000000 /dev/zero | tr '\0' x >"$t/follow2.log"
"$kr" --brief --follow "$t/follow2.log" >"$t/fout2" 2>/dev/null &
fpid=$!
i=0
until grep -qs '^pos:[[:space:]]*2000000$' /proc/$fpid/fdinfo/* || [ $i -ge 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
read_it=$([ "$i" -lt 300 ] && echo read)
mv "$t/follow2.log" "$t/follow2.log.1"
tail -n +2 "$data/drill-dmesg.log" >"$t/follow2.new"
mv "$t/follow2.new" "$t/follow2.log"
wait_for 7 "$t/fout2"
kill -TERM "$fpid"
wait "$fpid"
check "$(grep -c ' complete$' "$t/fout2"):$read_it" "7:read" \
	"--follow FILE: after a cut line at the end of the old file, the new file's first line counts"

# Field types: every record has every field, each always of one type.
if command -v jq >/dev/null; then
	"$kr" --json "$data/kunit-dmesg.log" "$data/drill-kmsg.log" "$t/cut.log" >"$t/all.json"
	bad=$(jq -c 'select(
		(.schema | type) != "number" or
		([.detector, .kind, .title] | map(type) | unique) != ["string"] or
		([.time, .offset, .object, .size, .cpu, .pid, .uid, .seq] |
		 map(type) - ["number", "null"] | length) != 0 or
		([.access, .guilty, .bad_access, .cache, .comm, .taint, .release, .host,
		  .boot_id, .wallclock, .caller, .reason] | map(type) - ["string", "null"] |
		 length) != 0 or
		(.stack | type) != "array" or (.stack_src | type) != "array" or
		((.alloc, .free) | type) as $t | ($t != "object" and $t != "null") or
		(.complete | type) != "boolean")' "$t/all.json" | wc -l)
	check "$bad" 0 "JSON: every field of every record has its documented type"
else
	check skip skip "JSON field types (# SKIP jq not installed)"
fi

# The collector: a cursor file (boot id + sequence number) makes a restart
# print nothing twice and lose nothing.
k=$data/drill-kmsg.log
head -n 100 "$k" >"$t/half.kmsg"	# ends inside the fourth report
if command -v jq >/dev/null; then
	"$kr" --kmsg="$t/half.kmsg" --cursor "$t/cur" --boot-id B1 --brief >"$t/run1"
	"$kr" --kmsg="$k" --cursor "$t/cur" --boot-id B1 --brief >"$t/run2"
	"$kr" --kmsg="$k" --brief >"$t/once"
	check "$(wc -l <"$t/run1"):$(wc -l <"$t/run2")" "3:4" \
		"restart mid-report: 3 reports before, the other 4 after"
	cat "$t/run1" "$t/run2" >"$t/both"
	check "$(cmp -s "$t/both" "$t/once" && echo same)" same \
		"the two runs together print exactly what one run prints"
	"$kr" --kmsg="$k" --cursor "$t/cur" --boot-id B1 --brief >"$t/run3"
	check "$(wc -l <"$t/run3")" 0 "a third run over the same records prints nothing"
	grep_ok "^boot_id B1$" "$t/cur" "the cursor names its boot"
	"$kr" --kmsg="$k" --cursor "$t/cur" --boot-id B2 --brief >"$t/run4" 2>"$t/err"
	check "$?:$(wc -l <"$t/run4")" "0:7" "a cursor from another boot: all of this boot's reports"
	grep_ok "is from boot B1, this is boot B2" "$t/err" "and says why"
	echo "garbage" >"$t/badcur"
	"$kr" --kmsg="$k" --cursor "$t/badcur" --boot-id B1 >/dev/null 2>"$t/err"
	check "$?" 1 "a file that is not a cursor: exit 1"
	grep_ok "is not a kfence-report cursor" "$t/err" "and says what to do"
	# records through a pipe (ssh host cat /dev/kmsg | ...): many per read()
	# shellcheck disable=SC2002 # a pipe, not a file, on purpose
	check "$(cat "$k" | "$kr" --kmsg=/dev/stdin --brief | wc -l)" 7 \
		"--kmsg on a pipe of records: all seven, read line by line"
	# shellcheck disable=SC2002
	check "$(cat "$k" | "$kr" --kmsg=/dev/stdin --follow --brief | wc -l)" 7 \
		"and with --follow, to the pipe's end"
	# A collector stopped by SIGTERM (systemctl stop) saves the cursor at the
	# last record it read, not at its last report: else its next run would take
	# what it read since for records overwritten before they were read.
	mkfifo "$t/fifo"
	"$kr" --kmsg="$t/fifo" --follow --cursor "$t/fcur" --boot-id B1 --brief >"$t/fout" 2>"$t/ferr" &
	pid=$!
	exec 3>"$t/fifo"
	cat "$k" >&3
	i=0
	while [ "$(wc -l <"$t/fout")" -lt 7 ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	sleep 0.5
	kill -TERM "$pid"
	wait "$pid"
	rc=$?
	exec 3>&-
	check "$rc:$(wc -l <"$t/fout"):$(grep '^next_seq' "$t/fcur")" "0:7:next_seq 1310" \
		"SIGTERM: exit 0, the cursor after the last record read (1309)"
	# A report cut by the ring: the first run read its first lines (head -n
	# 100: the uaf_read report from 1178 to 1188), then the ring overwrote the
	# rest before the next run. The next run still prints it, as a partial
	# record saying why (lost-records), from the lines the cursor kept; a
	# stderr line alone is not enough.
	"$kr" --kmsg="$t/half.kmsg" --cursor "$t/rcur" --boot-id B1 --brief >/dev/null
	cp "$t/rcur" "$t/rcur2"
	tail -n +124 "$k" >"$t/after.kmsg"	# all of the report overwritten
	"$kr" --kmsg="$t/after.kmsg" --cursor "$t/rcur" --boot-id B1 --json >"$t/out" 2>"$t/err"
	check "$(jq -r '[.title, .complete, .reason] | @tsv' "$t/out" | head -n 1)" \
		"$(printf 'KFENCE: use-after-free read in drill_uaf_read\tfalse\tlost-records')" \
		"the ring overwrote a report's rest between runs: its record, partial, reason lost-records"
	check "$(wc -l <"$t/out"):$(jq -r 'select(.complete)' "$t/out" | grep -c '^{')" "4:3" \
		"then the three reports after it, complete"
	grep_ok "records 1178-1211 were overwritten" "$t/err" "and the loss on stderr too"
	tail -n +110 "$k" >"$t/after.kmsg"	# 1189-1197 overwritten, the rest kept
	"$kr" --kmsg="$t/after.kmsg" --cursor "$t/rcur2" --boot-id B1 --json >"$t/out" 2>"$t/err"
	check "$(jq -r '[.title, .complete, .reason, (.free.stack | length)] | @tsv' "$t/out" | head -n 1)" \
		"$(printf 'KFENCE: use-after-free read in drill_uaf_read\tfalse\tlost-records\t7')" \
		"only its middle overwritten: one partial record with the lines before and after the gap"
	check "$(wc -l <"$t/out")" 4 "and the three after it"
else
	for c in "partial record when the ring overwrote the rest" "three complete after it" "loss on stderr" \
		"partial record with lines on both sides of a gap" "three after it"; do
		check skip skip "$c (# SKIP jq not installed)"
	done
fi
# the same after 5000 ordinary records read by the first run: what the
# cursor keeps is the open report's records, not everything read
awk 'BEGIN { for (i = 1; i <= 5000; i++) printf "6,%d,1000,-;eth0: link up\n", i }' >"$t/noisy.kmsg"
awk -F, -v OFS=, '{ $2 += 5000; print }' "$k" >"$t/shifted.kmsg"	# after the noise
sed -n 89,100p "$t/shifted.kmsg" >>"$t/noisy.kmsg"	# the uaf_read report begun
"$kr" --kmsg="$t/noisy.kmsg" --cursor "$t/ncur" --boot-id B1 --brief >/dev/null
check "$(grep -c '^record ' "$t/ncur")" 11 "the cursor holds the open report's 11 records"
tail -n +124 "$t/shifted.kmsg" >"$t/after.kmsg"
"$kr" --kmsg="$t/after.kmsg" --cursor "$t/ncur" --boot-id B1 --brief >"$t/out" 2>/dev/null
check "$(head -n 1 "$t/out" | grep -c 'incomplete:lost-records$'):$(wc -l <"$t/out")" "1:4" \
	"and the next run prints that report, partial, then the three after it"
grep -v '^[0-9]*,11[89][0-9],' "$k" >"$t/gap.kmsg"	# records 1180-1199 lost
"$kr" --kmsg="$t/gap.kmsg" --brief >"$t/out"
check "$(grep -c 'incomplete:lost-records' "$t/out")" 1 \
	"a gap in the sequence numbers marks the report it hit"
"$kr" --kmsg="$k" --cursor "$t/cap" --boot-id B1 --max-per-boot 2 --brief >"$t/out" 2>"$t/err"
check "$(wc -l <"$t/out")" 2 "--max-per-boot 2 prints two"
grep_ok "5 reports this boot not printed" "$t/err" "and counts the rest"
"$kr" --kmsg="$k" --cursor "$t/cap" --boot-id B1 --max-per-boot 2 --brief >"$t/out" 2>/dev/null
check "$(wc -l <"$t/out")" 0 "the cap holds across a restart of this boot"
"$kr" --json --kmsg="$k" --boot-id B1 --host web-1 | head -n 1 >"$t/out"
grep_ok '"host":"web-1","boot_id":"B1"' "$t/out" "records carry the host and boot id"
grep_ok '"taint":"GBON","release":"6.1.192"' "$t/out" "and the taint and release of the footer"

# --follow on a /dev/kmsg this user may not read
printf '3,1,1,-;x\n' >"$t/private.kmsg"
chmod 600 "$t/private.kmsg"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	chmod 755 "$t"
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$kr" --kmsg="$t/private.kmsg" --follow >/dev/null 2>"$t/err"
	rc=$?
else
	chmod 000 "$t/private.kmsg"
	"$kr" --kmsg="$t/private.kmsg" --follow >/dev/null 2>"$t/err"
	rc=$?
fi
check "$rc" 1 "--follow without permission: exit 1"
grep_ok "Permission denied (run as root, or set kernel.dmesg_restrict=0)" "$t/err" \
	"and says what to do"

# --summary: buckets with counts
"$kr" --summary "$data/drill-dmesg.log" "$data/drill-dmesg.log" >"$t/out"
check "$(grep -c '^ *2 *2 ' "$t/out")" 7 "--summary: two logs of the drill give 7 buckets of 2"
"$kr" --summary=1 --json "$data/kunit-dmesg.log" >"$t/out"
grep_ok '"bucket":"KFENCE: out-of-bounds read in test_out_of_bounds_read","title":' "$t/out" \
	"--summary=1 --json: a bucket is the title alone"
grep_ok '"count":4,"complete":4,"hosts":0,"first_seen":"0.497808 s","last_seen":"0.581011 s"' "$t/out" \
	"with its count and first and last time seen"
echo hello | "$kr" --summary >"$t/out"
check "$?:$(wc -l <"$t/out")" "0:1" "--summary of a log with no report: exit 0, the header alone"
echo hello | "$kr" --summary --json >"$t/out"
check "$?:$(wc -c <"$t/out")" "0:0" "--summary --json of a log with no report: exit 0, no bucket"
"$kr" --json --kmsg="$k" --host web-1 >"$t/fleet.jsonl"
"$kr" --json --kmsg="$k" --host web-2 >>"$t/fleet.jsonl"
"$kr" --json "$data/drill-dmesg.log" >>"$t/fleet.jsonl"
"$kr" --summary --json "$t/fleet.jsonl" >"$t/out"
check "$(grep -c '"count":3,"complete":3,"hosts":2,' "$t/out")" 7 \
	"--summary of the JSON records of two hosts and a log: 7 buckets of 3, on 2 hosts"
sed 's/^{"schema":3,/{"schema":2,/' "$t/fleet.jsonl" | "$kr" --summary --json >"$t/out"
check "$(grep -c '"count":3,"complete":3,"hosts":2,' "$t/out")" 7 \
	"--summary reads the records of schema 2 too"

# --stats
"$kr" --stats="$data/kfence-stats.txt" --json >"$t/out"
grep_ok '"total_bugs":7' "$t/out" "--stats --json: the counters"
grep_ok '"skipped_allocations_capacity":12' "$t/out" "named as JSON keys"
grep_ok '"pool_was_full":true' "$t/out" "and whether the pool ran full"
# 5.12 to 5.15 do not count the allocations skipped for capacity: whether
# the pool ran full is unknown there, not false
"$kr" --stats="$data/kfence-stats-5.12.txt" --json >"$t/out"
grep_ok '"total_bugs":0},"sample_interval_ms":null,"sampling":true,"pool_was_full":null}' \
	"$t/out" "--stats --json of a 5.12 kernel: pool_was_full null"
"$kr" --stats="$data/kfence-stats-5.12.txt" >"$t/out"
grep_ok "^pool: unknown" "$t/out" "and unknown in the text"
# A stats file that is not the kernel's (any bytes, names repeated or
# differing only in punctuation): the JSON is still ASCII, valid, and has
# no key twice (python3 checks both; without it only ASCII is checked)
printf 'enabled: 1\n\377\376 bugs: 3\ntotal bugs: 1\ntotal bugs: 2\ntotal_bugs: 4\nq"uote\\: 5\n: 6\n' \
	>"$t/stats-bad"
"$kr" --stats="$t/stats-bad" --json >"$t/out"
check "$?:$(LC_ALL=C tr -d '\n -~' <"$t/out" | wc -c)" "0:0" \
	"--stats --json of a malformed stats file: exit 0, printable ASCII only"
if command -v python3 >/dev/null; then
	python3 -c 'import json, sys
def pairs(p):
    if len(p) != len(set(k for k, _ in p)):
        sys.exit("duplicate key in %r" % (p,))
    return dict(p)
s = json.loads(open(sys.argv[1], encoding="utf-8").read(), object_pairs_hook=pairs)["stats"]
sys.exit(0 if len(s) == 7 and s["total_bugs"] == 1 and s["total_bugs_2"] == 2 else "wrong: %r" % s)' \
		"$t/out" 2>"$t/err"
	check "$?:$(cat "$t/err")" "0:" "and valid UTF-8 JSON with seven keys, none twice"
else
	n=$((n + 1)); echo "ok $n # SKIP python3 is not installed: no JSON duplicate-key check"
fi
"$kr" --stats=/nonexistent/stats >/dev/null 2>"$t/err"
check "$?" 1 "--stats on a missing file: exit 1"
grep_ok "is debugfs mounted" "$t/err" "and asks about debugfs"

# --vmlinux
"$kr" --vmlinux /nonexistent/vmlinux "$data/drill-dmesg.log" >/dev/null 2>"$t/err"
check "$?" 1 "--vmlinux on a missing file: exit 1"
grep_ok "cannot read vmlinux '/nonexistent/vmlinux'" "$t/err" "and names it"
"$kr" --vmlinux "$data/kfence-stats.txt" "$data/drill-dmesg.log" >/dev/null 2>"$t/err"
check "$?" 1 "--vmlinux on a file that is not ELF: exit 1"
grep_ok "is not an ELF file" "$t/err" "and says so"
if [ -n "$fakevm" ] && command -v addr2line >/dev/null; then
	printf '%s\n' '==================================================================' \
		'BUG: KFENCE: use-after-free read in fake_victim+0x8/0x20' '' \
		'Use-after-free read at 0x00000000aabbccdd (in kfence-#1):' \
		' fake_victim+0x8/0x20' ' fake_caller+0x17/0x30' ' drill_x+0x1/0x2 [mod]' \
		'==================================================================' >"$t/vm.log"
	"$kr" --json --vmlinux "$fakevm" "$t/vm.log" >"$t/out"
	grep -Eq '"stack_src":\["[^"]*fake-vmlinux\.c:(9|10|11)","[^"]*fake-vmlinux\.c:1[5-7]",null\]' "$t/out"
	check "$?" 0 "--vmlinux: frames get file:line, module frames stay null"
else
	check skip skip "--vmlinux symbolization (# SKIP no fake vmlinux or addr2line)"
fi

# The man page's title rules are src/title-rules.def's (EXACT x is x,
# PREFIX x*, SUFFIX *x, SUB *x*)
top=$data/../..
sed -n 's/^SKIP([A-Z0-9_]*, \([A-Z]*\), "\(.*\)")$/\1 \2/p' "$top/src/title-rules.def" |
	awk '$1 == "EXACT" { print $2 } $1 == "PREFIX" { print $2 "*" }
	     $1 == "SUFFIX" { print "*" $2 } $1 == "SUB" { print "*" $2 "*" }' | sort -u >"$t/code.skip"
sed -n '/^# TITLES AND BUCKETS/,/^When every frame/p' "$top/doc/kfence-report.1.scd" |
	sed -n '/^- /,/^$/p' | sed 's/^- [^:]*: //; s/\\//g' | tr ',' '\n' |
	sed 's/^ *//; s/ *$//' | grep -v '^$' | sort -u >"$t/doc.skip"
check "$(diff "$t/code.skip" "$t/doc.skip" | grep -c '^[<>]'):$(awk 'END { print (NR > 100) }' "$t/code.skip")" \
	"0:1" \
	"kfence-report(1) lists the title rules of src/title-rules.def, no more, no less"

echo "1..$n"
exit $failed
