#!/bin/sh
# shellcheck shell=sh
# Fire every bug class of the kfence_drill module, read the kernel log back
# with kfence-report (from /dev/kmsg) and check that each class was reported
# once, with the right kind, access and function. Prints TAP; exit 4 (skip)
# when kfence-report is not in the initramfs (no --meson-build).
#
# With k513.kfence_dump=1 on the kernel command line it also prints the
# drill's reports as raw /dev/kmsg records and as dmesg text, between
# K513-KFENCE-DUMP markers: how kfence-tools/tests/data/drill-* were made.
D=/sys/kernel/debug/kfence_drill
KO=/lib/k513/modules/kfence_drill.ko
IV=/sys/module/kfence/parameters/sample_interval
STATS=/sys/kernel/debug/kfence/stats

# KFENCE's own count of the bugs it reported
total_bugs() { awk -F: '$1 == "total bugs" { print $2 + 0 }' $STATS; }

# class:kind:access (- when the report names no access)
CLASSES="oob_read:out-of-bounds:read oob_write:out-of-bounds:write
redzone_write:memory-corruption:- uaf_read:use-after-free:read
uaf_write:use-after-free:write invalid_free:invalid-free:-
double_free:invalid-free:-"

if ! command -v kfence-report >/dev/null; then
	echo "kfence-report is not on PATH: run the guest with --meson-build"
	exit 4
fi
[ -f "$KO" ] || { echo "Bail out! no $KO in the initramfs"; exit 1; }
lsmod | grep -q '^kfence_drill ' || insmod "$KO" ||
	{ echo "Bail out! insmod $KO failed"; exit 1; }

echo "1..11"
n=0
bugs0=$(total_bugs)
# a collector, as a fleet would run it: reports must arrive as they happen
kfence-report --kmsg --follow --brief >/tmp/kfd-follow.txt 2>&1 &
follower=$!
for c in $CLASSES; do
	class=${c%%:*}
	if ! echo "$class" >"$D/fire"; then
		echo "# fire $class failed: $(dmesg | grep kfence_drill | tail -n 1)"
	fi
done
bugs1=$(total_bugs)
kfence-report --kmsg --brief >/tmp/kfd-brief.txt
kfence-report --kmsg --json >/tmp/kfd.json
sed 's/^/# /' /tmp/kfd-brief.txt | grep drill_

for c in $CLASSES; do
	class=${c%%:*} rest=${c#*:}
	kind=${rest%%:*} access=${rest#*:}
	title=$kind
	[ "$access" = - ] || title="$kind $access"
	n=$((n + 1))
	# time kind access function object cache completeness
	got=$(awk -v k="$kind" -v a="$access" -v f="drill_$class" \
		'$2 == k && $3 == a && $4 == f && $7 == "complete"' /tmp/kfd-brief.txt | wc -l)
	if [ "$got" -eq 1 ]; then
		echo "ok $n - $class: $title in drill_$class"
	else
		echo "not ok $n - $class: $got complete reports of $title in drill_$class (want 1)"
	fi
done

# The JSON records carry the stacks: the allocation came from the drill.
n=$((n + 1))
bad=$(grep '"function":"drill_' /tmp/kfd.json | grep -vc '"alloc":{[^}]*drill_get_object')
if [ "$bad" -eq 0 ] && grep -q '"function":"drill_' /tmp/kfd.json; then
	echo "ok $n - every drill report has drill_get_object in its allocation stack"
else
	echo "not ok $n - $bad drill reports without drill_get_object in the allocation stack"
fi

# The follower saw each report while still running.
n=$((n + 1))
sleep 1
got=$(grep -c ' drill_.* complete$' /tmp/kfd-follow.txt)
kill "$follower"
if [ "$got" -eq 7 ]; then
	echo "ok $n - kfence-report --kmsg --follow printed the 7 reports as they came"
else
	echo "not ok $n - kfence-report --kmsg --follow printed $got of 7 drill reports"
fi

# KFENCE's own counter agrees: one bug per class (fire fails with EIO when
# the tracepoint it counts on saw no report).
n=$((n + 1))
if [ "$((bugs1 - bugs0))" -eq 7 ]; then
	echo "ok $n - KFENCE's 'total bugs' counter grew by 7"
else
	echo "not ok $n - KFENCE's 'total bugs' counter grew by $((bugs1 - bugs0)), want 7"
fi

# With KFENCE sampling nothing, fire must give up and say so.
n=$((n + 1))
old=$(cat $IV)
echo 0 >$IV
if echo oob_read >"$D/fire" 2>/tmp/kfd-err; then
	echo "not ok $n - fire succeeded with KFENCE off"
elif dmesg | tail -n 5 | grep -q 'kfence_drill: no KFENCE object'; then
	echo "ok $n - fire times out with KFENCE off ($(cat /tmp/kfd-err))"
else
	echo "not ok $n - fire failed with KFENCE off but logged no warning"
fi
echo "$old" >$IV

if grep -q 'k513.kfence_dump=1' /proc/cmdline; then
	echo "K513-KFENCE-DUMP kmsg"
	# from the ruler before the first drill report to the end
	timeout 2 cat /dev/kmsg | awk '!on && /BUG: KFENCE: .* in drill_/ {
		on = 1; print prev } on { print } { prev = $0 }'
	echo "K513-KFENCE-DUMP dmesg"
	dmesg | awk '!on && /BUG: KFENCE: .* in drill_/ { on = 1; print prev }
		on { print } { prev = $0 }'
	echo "K513-KFENCE-DUMP end"
fi
rmmod kfence_drill
