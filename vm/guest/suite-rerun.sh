# shellcheck shell=sh
# The project's guest-rerun host suites alone, for hunting a race on one
# kernel without the tree's selftests: only the tests whose name matches
# K513_ONLY (an extended regular expression; default: all), K513_REPEAT times
# in a row (default 1), each round's groups prefixed "rN." so a flake names
# its round. Both come from the kernel command line, e.g.
#   K513_KERNEL=6.1 vm/run-guest --suite rerun --meson-build build/ci \
#       --append 'K513_ONLY=uffdm- K513_REPEAT=5'
# shellcheck source=vm/guest/lib.sh
. /lib/k513/lib.sh

only=${K513_ONLY:-.}
rounds=${K513_REPEAT:-1}
# A line is "run_in DIR host.SUITE.NAME ...": pick by NAME.
[ -f /lib/k513/host-tests.sh ] &&
	awk -v re="$only" '$1 == "run_in" { n = $3; sub(/^host\.[^.]*\./, "", n); if (n ~ re) print }' \
		/lib/k513/host-tests.sh >/tmp/rerun.sh
if [ ! -f /lib/k513/host-tests.sh ]; then
	echo "K513-RESULT rerun host-tests FAIL no host tests in this initramfs (run-guest --meson-build)" |
		tee -a "$RESULTS"
elif [ ! -s /tmp/rerun.sh ]; then
	echo "K513-RESULT rerun select FAIL no guest test matches K513_ONLY='$only'" | tee -a "$RESULTS"
else
	echo "rerun: $(wc -l </tmp/rerun.sh) tests, $rounds rounds"
	round=1
	while [ "$round" -le "$rounds" ]; do
		sed "s/ host\./ r$round.host./" /tmp/rerun.sh >/tmp/rerun-round.sh
		# shellcheck source=/dev/null
		. /tmp/rerun-round.sh
		round=$((round + 1))
	done
fi
finish
