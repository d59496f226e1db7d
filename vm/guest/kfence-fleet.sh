#!/bin/sh
# shellcheck shell=sh
# kfence-report as a fleet runs it, on this kernel: every drill class is
# caught, titled and bucketed exactly as on every other kernel of the
# matrix (the expected titles and buckets below are the same for all); a
# collector restarted in the middle (--follow --cursor) prints each report
# once and loses none; --stats reads KFENCE's counters; and the idle
# collector's CPU time. Prints TAP; exit 4 (skip) without kfence-report.
D=/sys/kernel/debug/kfence_drill
KO=/lib/k513/modules/kfence_drill.ko
CUR=/tmp/kff.cursor
IDLE=${K513_KFENCE_IDLE:-20}

# class, then the title every kernel must give it; the bucket is the title
# and the two frames under the guilty one: the drill's fire_write and
# debugfs' full_proxy_write
TITLES="oob_read|KFENCE: out-of-bounds read in drill_oob_read
oob_write|KFENCE: out-of-bounds write in drill_oob_write
redzone_write|KFENCE: memory corruption in drill_redzone_write
uaf_read|KFENCE: use-after-free read in drill_uaf_read
uaf_write|KFENCE: use-after-free write in drill_uaf_write
invalid_free|KFENCE: invalid free in drill_invalid_free
double_free|KFENCE: invalid free in drill_double_free"

if ! command -v kfence-report >/dev/null; then
	echo "kfence-report is not on PATH: run the guest with --meson-build"
	exit 4
fi
[ -f "$KO" ] || { echo "Bail out! no $KO in the initramfs"; exit 1; }
lsmod | grep -q '^kfence_drill ' || insmod "$KO" ||
	{ echo "Bail out! insmod $KO failed"; exit 1; }

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); echo "not ok $n - $*"; }
# tap_in FILE: renumber the "ok - ..." / "not ok - ..." lines of a subshell
tap_in() {
	while read -r line; do
		case $line in
		ok*) ok "${line#ok - }" ;;
		*) notok "${line#not ok - }" ;;
		esac
	done <"$1"
}

fire() {
	echo "$1" >"$D/fire" || echo "# fire $1 failed: $(dmesg | grep kfence_drill | tail -n 1)"
}

# wait_lines FILE N: until FILE has N drill records (at most 20 s)
wait_lines() {
	i=0
	while [ "$(grep -c '"function":"drill_' "$1")" -lt "$2" ] && [ $i -lt 20 ]; do
		sleep 1
		i=$((i + 1))
	done
}

# Everything logged so far (the KUnit suite's reports, the drill's first
# round) is behind the cursor: the collectors below see only what follows.
rm -f "$CUR"
kfence-report --kmsg --cursor "$CUR" >/dev/null

# Collector A takes the first three classes, then stops; two are committed
# while no collector runs; collector B, started on A's cursor, must print
# those two and the last two, and nothing A printed.
kfence-report --kmsg --follow --json --cursor "$CUR" >/tmp/kff-a.json 2>/tmp/kff-a.err &
a=$!
for c in oob_read oob_write redzone_write; do fire $c; done
wait_lines /tmp/kff-a.json 3
kill "$a"
wait "$a" 2>/dev/null
for c in uaf_read uaf_write; do fire $c; done
kfence-report --kmsg --follow --json --cursor "$CUR" >/tmp/kff-b.json 2>/tmp/kff-b.err &
b=$!
for c in invalid_free double_free; do fire $c; done
wait_lines /tmp/kff-b.json 4
cat /tmp/kff-a.json /tmp/kff-b.json >/tmp/kff.json
sed 's/^/# collector: /' /tmp/kff-a.err /tmp/kff-b.err

echo "$TITLES" | while IFS='|' read -r class title; do
	got=$(grep -c "\"title\":\"$title\"" /tmp/kff.json)
	whole=$(grep "\"title\":\"$title\"" /tmp/kff.json | grep -c '"complete":true')
	if [ "$got" -eq 1 ] && [ "$whole" -eq 1 ]; then
		echo "ok - $class: once, complete, titled \"$title\""
	else
		echo "not ok - $class: $got reports titled \"$title\" ($whole complete) across the restart (want 1)"
	fi
done >/tmp/kff-titles.tap
tap_in /tmp/kff-titles.tap
total=$(grep -c '"function":"drill_' /tmp/kff.json)
if [ "$total" -eq 7 ]; then
	ok "restarted collector: 7 drill reports in all, none twice, none lost"
else
	notok "restarted collector: $total drill reports in all (want 7)"
fi

# Buckets: the whole boot's log holds each class at least twice
# (kfence-drill.sh's round and this one's), all in one bucket, which is the
# same string on every kernel.
kfence-report --kmsg --summary --json >/tmp/kff-sum.json
echo "$TITLES" | while IFS='|' read -r class title; do
	bucket="$title | fire_write | full_proxy_write"
	count=$(grep "\"bucket\":\"$bucket\"," /tmp/kff-sum.json | grep -o '"count":[0-9]*' |
		cut -d: -f2)
	if [ "${count:-0}" -ge 2 ]; then
		echo "ok - $class: bucket \"$bucket\" x$count"
	else
		echo "not ok - $class: no bucket \"$bucket\" of 2; have: $(grep -o '"bucket":"[^"]*drill_'"$class"'[^"]*"' /tmp/kff-sum.json)"
	fi
done >/tmp/kff-buckets.tap
tap_in /tmp/kff-buckets.tap
# each record carries the boot, release and taint
boot=$(cat /proc/sys/kernel/random/boot_id)
good=$(grep '"function":"drill_' /tmp/kff.json | grep "\"release\":\"$(uname -r)\"" |
	grep "\"boot_id\":\"$boot\"" | grep -c '"taint":"[A-Z]*B')
if [ "$good" -eq "$total" ] && [ "$total" -gt 0 ]; then
	ok "records carry boot id $boot, release $(uname -r) and the B taint"
else
	notok "$((total - good)) of $total records without this boot's id, release or a B taint"
fi

# KFENCE's counters
if kfence-report --stats --json >/tmp/kff-stats.json 2>&1 &&
	grep -q '"enabled":1,' /tmp/kff-stats.json && grep -q '"sampling":true' /tmp/kff-stats.json; then
	ok "--stats: $(grep -o '"total_bugs":[0-9]*' /tmp/kff-stats.json), sampling on"
else
	notok "--stats: $(cat /tmp/kff-stats.json)"
fi

# The idle collector's CPU time: utime + stime (clock ticks) of collector B
# over $IDLE seconds with nothing logged.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
t0=$(ticks "$b")
sleep "$IDLE"
t1=$(ticks "$b")
kill "$b"
hz=100
ms=$(((t1 - t0) * 1000 / hz))
echo "# K513-MEASURE kfence-collector-idle-cpu ms=$ms seconds=$IDLE per_hour_ms=$((ms * 3600 / IDLE))"
if [ "$ms" -le $((IDLE * 10)) ]; then
	ok "idle collector used ${ms} ms of CPU in ${IDLE} s (at most 1%)"
else
	notok "idle collector used ${ms} ms of CPU in ${IDLE} s (more than 1%)"
fi
echo "1..$n"
rmmod kfence_drill
