// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A stand-in for a vmlinux in the --vmlinux test: an ELF with debug
 * information whose functions have kernel-like names. cli.sh feeds a
 * report whose frames name them and checks the file:line it gets back.
 */
#include <stdio.h>

__attribute__((noinline)) int fake_victim(volatile char *p)
{
	return p[1];	/* the "use-after-free" line */
}

__attribute__((noinline)) int fake_caller(volatile char *p)
{
	return fake_victim(p) + 1;
}

int main(void)
{
	char buf[4] = "abc";

	printf("%d\n", fake_caller(buf));
	return 0;
}
