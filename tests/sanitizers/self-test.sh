#!/bin/sh
# tests/run-sanitizers must fail on a planted finding and print its report,
# also when the test that made it passes (a child's status ignored, or a
# program's output thrown away); a clean project must pass.
# usage: self-test.sh   (builds a small meson project in a temporary directory)
set -u
here=$(cd "$(dirname "$0")" && pwd)
run=$here/../run-sanitizers
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/p"
# Each program misbehaves only when K513_PLANT is set, so one build serves
# the clean run and the planted one.
cat >"$tmp/p/meson.build" <<'M'
project('plant', 'c', default_options: ['warning_level=2'])
threads = dependency('threads')
# TSan runs only the libuffdminor suite: every test is in it.
test('heap-overflow', executable('heap-overflow', 'heap-overflow.c'), suite: 'libuffdminor')
test('ub-in-child', executable('ub-in-child', 'ub-in-child.c'), suite: 'libuffdminor')
leak = executable('leak', 'leak.c')
test('leak-swallowed', find_program('sh'),
	args: ['-c', '"$0" >/dev/null 2>&1 || true', leak], suite: 'libuffdminor')
test('race', executable('race', 'race.c', dependencies: threads), suite: 'libuffdminor')
M
cat >"$tmp/p/heap-overflow.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void)
{
	char *p = malloc(8);
	size_t n = getenv("K513_PLANT") ? 9 : 8;

	memset(p, 'x', n);
	printf("%c\n", p[n - 1]);
	free(p);
	return 0;
}
C
cat >"$tmp/p/ub-in-child.c" <<'C'
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		volatile int x = getenv("K513_PLANT") ? INT_MAX : 0;

		x += 1;
		printf("%d\n", x);
		_exit(0);
	}
	waitpid(pid, NULL, 0); /* its status ignored: the test passes */
	return 0;
}
C
cat >"$tmp/p/leak.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void *keep;
int main(void)
{
	char *p = malloc(64);

	strcpy(p, "leak");
	puts(p);
	if (getenv("K513_PLANT"))
		p = NULL;
	keep = p;
	return 0;
}
C
cat >"$tmp/p/race.c" <<'C'
#include <pthread.h>
#include <stdlib.h>
static int counter;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int plant;
static void *bump(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100000; i++) {
		if (!plant)
			pthread_mutex_lock(&lock);
		counter++;
		if (!plant)
			pthread_mutex_unlock(&lock);
	}
	return NULL;
}
int main(void)
{
	pthread_t a, b;

	plant = getenv("K513_PLANT") != NULL;
	pthread_create(&a, NULL, bump, NULL);
	pthread_create(&b, NULL, bump, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	return counter == 0;
}
C

fail=0
if out=$(env -u K513_PLANT "$run" --source "$tmp/p" 2>&1); then
	echo "ok - a clean project passes under ASan+UBSan and TSan"
else
	echo "not ok - a clean project failed"; printf '%s\n' "$out" | sed 's/^/#   /'; fail=1
fi
# planted LEG WHAT PATTERN...: the leg fails and prints each report.
planted() {
	leg=$1 what=$2
	shift 2
	out=$(K513_PLANT=1 "$run" --source "$tmp/p" "$leg" 2>&1)
	rc=$?
	miss=''
	for p in "$@"; do
		printf '%s\n' "$out" | grep -q -- "$p" || miss="$miss '$p'"
	done
	if [ "$rc" -ne 0 ] && [ -z "$miss" ]; then
		echo "ok - planted $what: the run fails and prints each report"
	else
		echo "not ok - planted $what: exit $rc, not printed:${miss:- (all printed)}"
		printf '%s\n' "$out" | sed 's/^/#   /'
		fail=1
	fi
}
planted --asan-only "a heap overflow, UB in a child whose status is ignored and a leak in output thrown away" \
	'ERROR: AddressSanitizer: heap-buffer-overflow' \
	'runtime error: signed integer overflow' \
	'ERROR: LeakSanitizer: detected memory leaks'
planted --tsan-only "a data race" 'WARNING: ThreadSanitizer: data race'
exit $fail
