/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A table of cells, each run in its own forked child, several at once,
 * each watched for silence (test-failmatrix.c, test-remotefail.c): a hang
 * or a crash is one failed cell, not a hung suite.  A child says what it
 * does with cell_say("phase ..."); its last line is its verdict: PASS,
 * SKIP why, FAIL why.
 */
#ifndef UFFDM_TEST_CELLS_H
#define UFFDM_TEST_CELLS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define CELL_SILENCE_S	10	/* a child silent this long is killed: its cell fails */

void cell_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* In a cell: the verdict, said, and the cell's return value. */
#define CELL_FAIL(...) do { cell_say("FAIL " __VA_ARGS__); return 1; } while (0)
#define CELL_SKIP(...) do { cell_say("SKIP " __VA_ARGS__); return 0; } while (0)

struct verdict {
	char name[96];		/* the caller's */
	char text[320];
	bool fail, skip;
};

/* run(cells + i * size) for each of n cells, in children, parallel at once. */
void cells_run(const void *cells, size_t size, size_t n, int (*run)(const void *cell),
	       unsigned int parallel, struct verdict *v);

/* The table, one line per cell under mem's name; the case fails if a cell did. */
void cells_report(const char *mem, size_t n, const struct verdict *v);

/*
 * One access of p in this thread, SIGBUS caught: 1 when it raised SIGBUS,
 * 0 when it completed (a read's byte in *got when got is not NULL).
 * cells_catch_sigbus() installs the handler in a cell's child.
 */
void cells_catch_sigbus(void);
int touch(volatile char *p, bool wr, char *got);

struct toucher {
	pthread_t tid;
	volatile char *p;
	bool wr;
	int sigbus;
	char got;
};

void start_touch(struct toucher *t, volatile char *p, bool wr);
/* Joined within seconds: 0, or -ETIMEDOUT (the thread still sleeps). */
int join_touch(struct toucher *t, unsigned int seconds);

#endif
