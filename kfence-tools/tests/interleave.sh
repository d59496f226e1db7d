#!/bin/sh
# Any number of reports printed at once: a central log of N hosts (rsyslog
# and journal prefixes mixed), N tasks of one host (printk caller ids
# [T...]), N CPUs ([C...]), each printing two of the drill's seven reports
# with every line interleaved with every other host's, task's or CPU's.
# Generated here from the golden drill log (nothing large is committed).
# Each cell asserts the exact records: one per report, each complete, with
# its own title and its own host or caller. Then what cannot be told apart
# (two reports of one host, no caller ids) must say so in the record, and
# keep each report's own title.
# Usage: interleave.sh KFENCE-REPORT DATA-DIR (prints TAP)
kr=$1 data=$2
. "$(dirname "$0")/tap.sh"

if ! command -v jq >/dev/null; then
	echo "1..0 # SKIP jq is not installed (apt-get install jq)"
	exit 0
fi

# gen MODE N: the interleaved log on stdout, the expected "who title"
# lines (sorted) in $t/want. Source N prints reports N%7 and (N+3)%7 of
# the drill log, with a line of its own between them.
gen() {
	awk -v mode="$1" -v N="$2" -v want="$t/want" '
	BEGIN {
		split("out-of-bounds read in drill_oob_read|out-of-bounds write in drill_oob_write|" \
		      "memory corruption in drill_redzone_write|use-after-free read in drill_uaf_read|" \
		      "use-after-free write in drill_uaf_write|invalid free in drill_invalid_free|" \
		      "invalid free in drill_double_free", title, "|")
	}
	{ sub(/^\[ *[0-9.]+\] /, "") }
	/^=+$/ { if (!inrep) { inrep = 1; nr++; len[nr] = 0 } else if (len[nr] > 1) inrep = 0 }
	inrep || /^=+$/ { if (nr) rep[nr, ++len[nr]] = $0 }
	END {
		for (h = 0; h < N; h++) {
			a = h % 7 + 1; b = (h + 3) % 7 + 1; k = 0
			for (i = 1; i <= len[a]; i++) line[h, ++k] = rep[a, i]
			line[h, ++k] = "kfence_drill: committing the next class"
			for (i = 1; i <= len[b]; i++) line[h, ++k] = rep[b, i]
			cnt[h] = k
			if (k > max) max = k
			if (mode == "hosts") who = sprintf("host-%03d", h)
			else if (mode == "tasks") who = sprintf("T%d", 1000 + h)
			else who = sprintf("C%d", h)
			print who " KFENCE: " title[a] > want
			print who " KFENCE: " title[b] > want
		}
		close(want)
		system("sort -o " want " " want)
		for (k = 1; k <= max; k++) for (h = 0; h < N; h++) {
			if (k > cnt[h]) continue
			us = sprintf("%d.%06d", 44 + int(k / 1000), (k % 1000) * 1000 + h)
			if (mode == "hosts" && h % 2)
				printf "2026-12-04T10:00:%02d+0000 host-%03d kernel: %s\n", k % 60, h, line[h, k]
			else if (mode == "hosts")
				printf "Dec  4 10:00:%02d host-%03d kernel: [%12s] %s\n", k % 60, h, us, line[h, k]
			else if (mode == "tasks")
				printf "[%12s] [  T%d] %s\n", us, 1000 + h, line[h, k]
			else
				printf "[%12s] [    C%d] %s\n", us, h, line[h, k]
		}
	}' "$data/drill-dmesg.log"
}

for mode in hosts tasks cpus; do
	for hosts in 1 8 9 40 200; do
		gen "$mode" "$hosts" >"$t/log"
		"$kr" --json "$t/log" >"$t/out"
		field=$([ "$mode" = hosts ] && echo host || echo caller)
		jq -r ".$field + \" \" + .title" "$t/out" | sort >"$t/got"
		check "$(wc -l <"$t/out"):$(jq -r 'select(.complete)' "$t/out" | grep -c '^{')" \
			"$((2 * hosts)):$((2 * hosts))" \
			"$hosts $mode interleaved line by line: $((2 * hosts)) records, all complete"
		check "$(wc -l <"$t/want"):$(diff "$t/want" "$t/got" 2>&1 | head -3 | tr '\n' ' ')" \
			"$((2 * hosts)):" \
			"$hosts $mode: each record has its own report's title and $field"
	done
done

# Told apart by nothing: one host, no caller ids, two reports' lines mixed.
# Both records say so (complete: false, reason interleaved) and each keeps
# the function of its own title line: no title is made up from the other
# report's frames.
gen hosts 2 | sed 's/host-00[01]/web/' >"$t/log"
"$kr" --json "$t/log" >"$t/out"
check "$(jq -r '[.complete, .reason] | @tsv' "$t/out" | sort | uniq -c | tr -s ' \t' ' ')" \
	" 4 false interleaved" \
	"two hosts' reports under one name: 4 records, each incomplete, reason interleaved"
check "$(jq -r .title "$t/out" | sort | tr '\n' '|')" \
	"KFENCE: out-of-bounds read in drill_oob_read|KFENCE: out-of-bounds write in drill_oob_write|KFENCE: use-after-free read in drill_uaf_read|KFENCE: use-after-free write in drill_uaf_write|" \
	"and each its own title, none taken from the other report"

echo "1..$n"
exit $failed
