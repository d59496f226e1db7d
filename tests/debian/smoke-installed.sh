#!/bin/sh
# Runs inside the chroot after the .debs are installed: each product's smoke
# check from its installed path, nothing from the source tree.
# shellcheck disable=SC2016 # the sh -c scripts expand in the inner shell
set -eu
fail=0
ok() { echo "ok - $1"; }
bad() { echo "not ok - $1"; fail=1; }
check() {
	name=$1
	shift
	if "$@" >/tmp/smoke.out 2>&1; then ok "$name"; else bad "$name"; sed 's/^/#   /' /tmp/smoke.out; fi
}

# libuffdminor-dev: the header, pkg-config file, shared and static library.
cat >/tmp/probe.c <<'C'
#include <stdio.h>
#include <uffdminor.h>

int main(void)
{
	struct uffdm_probe p;
	int r = uffdm_probe(&p);

	if (r < 0) {
		/* No userfaultfd here is an answer too; a crash is not. */
		printf("probe: %d\n", r);
		return 0;
	}
	printf("features %#llx minor-shmem %d\n", (unsigned long long)p.features,
	       uffdm_probe_minor_shmem(&p));
	return 0;
}
C
check "libuffdminor-dev: compile and run against the shared library" \
	sh -c 'gcc -Wall -Werror /tmp/probe.c -o /tmp/probe $(pkg-config --cflags --libs libuffdminor) && /tmp/probe'
check "libuffdminor-dev: link statically" \
	sh -c 'gcc /tmp/probe.c -o /tmp/probe-static $(pkg-config --cflags libuffdminor) -Wl,-Bstatic $(pkg-config --libs-only-l --static libuffdminor | sed "s/-lpthread//") -Wl,-Bdynamic -lpthread && /tmp/probe-static'
check "libuffdminor-dev: man pages" \
	test -f /usr/share/man/man3/uffdm_open.3.gz -a -f /usr/share/man/man7/uffdminor.7.gz
check "libuffdminor0: one soname, in the multiarch directory" \
	sh -c 'ls /usr/lib/*/libuffdminor.so.0'

# fanwatch: a normal user sees a file made in a watched tree.
mkdir -p /tmp/w/sub
chown -R 65534:65534 /tmp/w
check "fanwatch: --help" fanwatch --help
check "fanwatch: a normal user watches a tree" sh -c '
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		fanwatch -m -r -q --format "%e %w%f" /tmp/w >/tmp/fw.out 2>/tmp/fw.err &
	pid=$!
	i=0
	# Until a CREATE shows: the first line may be another event of a
	# touch that raced the watches being set up.
	while [ $i -lt 100 ] && ! grep -q . /tmp/fw.err 2>/dev/null &&
		! grep -q "CREATE /tmp/w/sub/f" /tmp/fw.out 2>/dev/null; do
		setpriv --reuid=65534 --regid=65534 --clear-groups touch /tmp/w/sub/f$i
		i=$((i + 1))
		sleep 0.1
	done
	kill $pid; wait $pid 2>/dev/null
	cat /tmp/fw.err >&2
	grep -q "CREATE /tmp/w/sub/f" /tmp/fw.out ||
		{ echo "no CREATE in $i touches; fanwatch printed:"; head -5 /tmp/fw.out; exit 1; }'
check "fanwatch: man page and completion" \
	test -f /usr/share/man/man1/fanwatch.1.gz -a -f /usr/share/bash-completion/completions/fanwatch

# kfence-tools: one report in, one record out.
check "kfence-report: parses a report" sh -c \
	'kfence-report --json </smoke/kfence-sample.log | grep -q "use-after-free"'

# k513-examples: a small migration, every page verified.
check "lm: migrates 8 MiB and verifies every page" \
	lm run --size 8M --precopy 0.2 --after 0.2 --verify -q
check "lm-bench: --help" lm-bench --help

[ "$fail" -eq 0 ] && echo "installed packages: all smoke checks passed"
exit "$fail"
