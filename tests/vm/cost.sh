#!/bin/sh
# tests/cost, the budget of tests/run-all: the projection of a cold run from
# a warm one, the correction for a busy machine, and the verdict.
set -u
cost=$(cd "$(dirname "$0")/.." && pwd)/cost
pass=0
fail=0
ok() {
	if [ "$2" -eq 0 ]; then
		pass=$((pass + 1)); echo "ok - $1"
	else
		fail=$((fail + 1)); echo "not ok - $1"; sed 's/^/#   /' "$tmp/out"
	fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t=$(getconf CLK_TCK)
c=$(nproc)

cat >"$tmp/budget" <<EOF
# a comment
cold-total 1000
fresh-installs 50
a 100
b 100
EOF
# a: 100 s, nobody else on the machine; b: 200 s during which others took
# half of every core (b's own processes used 10 s of CPU).
cat >"$tmp/legs" <<EOF
a 0 0 0 100 0 0
b 100 0 0 300 $((c * t * 100 + t * 10)) $((t * 10))
EOF
printf 'kernel:x 400\nkernel:x 400\nsrc:y 20\n' >"$tmp/ledger"

"$cost" report "$tmp/legs" "$tmp/ledger" /dev/null "$tmp/budget" --enforce >"$tmp/out" 2>&1
rc=$?
grep -q '^b  *200s  *100s  *100s' "$tmp/out"
ok "a busy machine's share is taken out of the leg's time" $?
grep -q 'an empty cache adds 420 s (2 cached items)' "$tmp/out"
ok "a cached thing used twice counts once" $?
grep -q 'a fresh machine 50 s of installs' "$tmp/out"
ok "no install in this run: the budget's fresh-installs" $?
grep -q 'projected cold total: 670 s' "$tmp/out" && [ "$rc" -eq 0 ]
ok "under the budget: 200 + 420 + 50 s, exit 0" $?
grep -q 'other processes took 33% of the machine: a lower bound' "$tmp/out"
ok "a busy machine is said: the projection is a lower bound" $?

printf '30 gcc\n5 qemu-system-x86\n' >"$tmp/apt"
printf 'kernel:x 900\n' >"$tmp/ledger"
"$cost" report "$tmp/legs" "$tmp/ledger" "$tmp/apt" "$tmp/budget" --enforce >"$tmp/out" 2>&1
rc=$?
grep -q 'a fresh machine 15 s of installs' "$tmp/out" &&
	grep -q 'projected cold total: 1115 s' "$tmp/out" && grep -q '^FAIL: .*by 115 s' "$tmp/out" &&
	[ "$rc" -eq 1 ]
ok "over the budget with --enforce: this run's installs counted once, FAIL, exit 1" $?
printf '80 everything\n' >"$tmp/apt"
"$cost" report "$tmp/legs" "$tmp/ledger" "$tmp/apt" "$tmp/budget" >"$tmp/out" 2>&1
grep -q 'a fresh machine 0 s of installs' "$tmp/out"
ok "a run that installed more than the budget's fresh-installs adds none" $?
"$cost" report "$tmp/legs" "$tmp/ledger" "$tmp/apt" "$tmp/budget" >"$tmp/out" 2>&1
rc=$?
grep -q '^FAIL: ' "$tmp/out" && [ "$rc" -eq 0 ]
ok "over the budget without --enforce (a partial matrix): said, exit 0" $?

printf 'a 0 0 0 150 0 0\n' >"$tmp/legs"
"$cost" report "$tmp/legs" /nonexistent /nonexistent "$tmp/budget" >"$tmp/out" 2>&1
grep -q '^a  *150s  *150s  *100s  over its budget' "$tmp/out"
ok "a leg over its own budget is named" $?

"$cost" report "$tmp/legs" /nonexistent /nonexistent "$tmp/nobudget" >"$tmp/out" 2>&1
[ $? -eq 2 ] && grep -q 'no file' "$tmp/out"
ok "a missing budget file: exit 2 and its name" $?

# sample: the caller's CPU grows by what a waited-for child burned
sh -c '
	before=$("$0" sample $$)
	i=0; while [ $i -lt 300000 ]; do i=$((i + 1)); done
	after=$("$0" sample $$)
	set -- $before $after
	[ $# -eq 6 ] && [ "$4" -ge "$1" ] && [ "$5" -gt "$2" ]' "$cost" >"$tmp/out" 2>&1
ok "sample: wall, the machine's and the caller's ticks" $?
"$cost" sample 0 >"$tmp/out" 2>&1
[ $? -eq 2 ]
ok "sample without a live PID: usage, exit 2" $?

echo "cost: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
