/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Shared by the libuffdminor tests: each test file crosses its cases over
 * the memory types, like the kernel's uffd-unit-tests table, and skips a
 * case with a printed reason when the kernel or the hugepage pool lacks
 * what it needs (cmocka 1.1.5's skip() takes no message).
 */
#ifndef UFFDM_TEST_COMMON_H
#define UFFDM_TEST_COMMON_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <k513-test.h>

#include "uffdminor.h"

struct mem_case {
	enum uffdm_backing backing;
	const char *name;
};

extern const struct mem_case shmem_case, hugetlb_case;

/* One table row per memory type: "fn/shmem", "fn/hugetlb". */
#define CROSS(fn) \
	{ #fn "/shmem", fn, NULL, NULL, (void *)&shmem_case }, \
	{ #fn "/hugetlb", fn, NULL, NULL, (void *)&hugetlb_case }

/* Skipping longjmps out of the case: free what the helpers made first. */
#define SKIP_BECAUSE(...) do { \
	put_all(); \
	K513_SKIP(__VA_ARGS__); \
} while (0)

/* Close/destroy what open_uffd()/make_region() made (others too); put_all() all of them. */
void put_uffd(struct uffdm *u);
void put_region(struct uffdm_region *r);
void put_all(void);
/* Track a descriptor opened by hand, so a skip frees it too. */
struct uffdm *adopt_uffd(struct uffdm *u);

/* The running kernel is at least major.minor. */
int kernel_at_least(int major, int minor);
/*
 * The case's memory type, after skipping when the kernel cannot fault it;
 * failing when it must (by version, on an architecture with
 * HAVE_ARCH_USERFAULTFD_MINOR) but does not.
 */
const struct mem_case *need_case(void **state);
/* Page size of the case's memory type (0 when unknown). */
size_t case_page_size(const struct mem_case *mc);
/* A region of npages pages, or skip (empty hugepage pool) with the reason. */
struct uffdm_region *make_region(const struct mem_case *mc, size_t npages);
/* A userfaultfd, or skip with uffdm_open_explain()'s reason. */
struct uffdm *open_uffd(unsigned int flags, uint64_t features);
/* Region populated and registered MINOR on u. */
struct uffdm_region *registered_region(struct uffdm *u, const struct mem_case *mc,
				       size_t npages, unsigned int reg_flags);
/* The probe, or fail. */
struct uffdm_probe probe(void);

/* The pattern a test callback writes into page i, and the check of it. */
void fill_page(void *page, size_t len, size_t i);
int check_page(const void *page, size_t len, size_t i);

/*
 * A thread reading page i of r's view once and checking it (fill_page()'s
 * pattern). A SIGBUS is caught as READ_SIGBUS when sigbus_jump() is the
 * process's handler; otherwise it ends the process, as it would any.
 */
enum { READ_BAD, READ_OK, READ_SIGBUS };
struct page_reader {
	struct uffdm_region *r;
	size_t i;
	int ok;
	int result;		/* READ_* */
	pthread_t tid;
};
void start_reader(struct page_reader *t, struct uffdm_region *r, size_t i);
/* Joins it: whether the page read right. */
int join_reader(struct page_reader *t);
/* Joins it within seconds (a read still asleep then fails the case): READ_*. */
int join_reader_within(struct page_reader *t, unsigned int seconds);

/*
 * A SIGBUS handler (install it with SA_NODEFER) that jumps to this thread's
 * sigbus_jmp when set, and otherwise ends the process with status 40: a
 * SIGBUS nobody expected.
 */
extern __thread sigjmp_buf *sigbus_jmp;
void sigbus_jump(int sig);
/* sigbus_jump() as the process's SIGBUS handler (SA_NODEFER). */
void catch_sigbus(void);
/* With it: 1 when reading p raised SIGBUS, 0 when it read. */
int read_sigbus_jump(const volatile char *p);

/* Run fn in a forked child under an alarm() watchdog; its exit status or signal. */
struct child_result {
	int exited, status, signal;
};
struct child_result run_child(int (*fn)(void *), void *arg, unsigned int seconds);

/*
 * fn in a child (after a skip check for npages of mc): it must die of
 * SIGBUS, not hang (20 s watchdog) and not exit.
 */
void expect_child_sigbus(const struct mem_case *mc, size_t npages, int (*fn)(void *), void *arg);

/* Drop to uid/gid 65534 (nobody) when root; 0 when done or not needed. */
int drop_privileges(void);

/* Dirty tracking rows: each forced kind x memory type. */
struct track_case {
	enum uffdm_track_kind kind;
	const struct mem_case *mc;
};

extern const struct track_case wp_shmem, wp_hugetlb, scan_shmem, scan_hugetlb,
	sd_shmem, sd_hugetlb;

#define TRACK_ROW(fn, c) { #fn "/" #c, fn, NULL, NULL, (void *)&c }
#define TRACK_ROWS(fn) \
	TRACK_ROW(fn, scan_shmem), TRACK_ROW(fn, scan_hugetlb), \
	TRACK_ROW(fn, sd_shmem), TRACK_ROW(fn, sd_hugetlb), \
	TRACK_ROW(fn, wp_shmem), TRACK_ROW(fn, wp_hugetlb)

/*
 * The kind started on r's view, or skip where the kernel says it lacks it
 * (a kind whose feature the kernel claims must start: a failure fails).
 */
struct uffdm_tracker *start_tracker(const struct track_case *c, struct uffdm_region *r);
/* Bit i of a tracker's bitmap. */
bool bit_is_set(const uint8_t *bm, size_t i);
/* Write one byte of each page in set[0..n), past fill_page()'s first word. */
void write_pages(uint8_t *view, size_t page, const unsigned int *set, size_t n);
bool in_set(unsigned int p, const unsigned int *set, size_t n);

/*
 * Tracking memory a handler serves: the kinds that can work there.
 * uffd-wp cannot (a second descriptor cannot register the range).
 */
#define TRACK_SERVED_ROWS(fn) \
	TRACK_ROW(fn, scan_shmem), TRACK_ROW(fn, scan_hugetlb), \
	TRACK_ROW(fn, sd_shmem), TRACK_ROW(fn, sd_hugetlb)

/*
 * npages of c's memory that a running handler serves (its callback stamps
 * each page with fill_page() through the backing view; nothing is mapped
 * yet), registered as c's kind needs: pagemap-scan shares the handler's
 * descriptor, opened with WP_ASYNC and registered MINOR|WP; soft-dirty
 * takes a plain MINOR registration.  Then c's kind started on it, or skip
 * with the reason where the kernel lacks it.
 */
struct served {
	struct uffdm *u;
	struct uffdm_region *r;
	struct uffdm_handler *h;
	struct uffdm_tracker *t;
};
void served_start(struct served *s, const struct track_case *c, size_t npages);
/* The same without the tracker; wp_async: the descriptor and registration pagemap-scan needs. */
void served_setup(struct served *s, const struct mem_case *mc, bool wp_async, size_t npages);
/* Pages the handler's callback filled so far. */
uint64_t served_fills(const struct served *s);
/* Tracker (if any), handler, region, descriptor, in that order. */
void served_stop(struct served *s);

/* Descriptors open in this process, and mappings: nothing half-made leaks. */
unsigned int open_fd_count(void);
unsigned int mapping_count(void);

#endif

/*
 * End to end, no cmocka inside (it runs in forked children too): a region
 * populated with zeroes and registered MINOR; a handler whose callback
 * stamps each page through the backing view; fault_threads threads each
 * reading their own pages_per_thread pages once through the view.
 */
struct e2e {
	enum uffdm_backing backing;
	size_t pages_per_thread;
	unsigned int fault_threads, handler_threads;
	unsigned int open_flags;
	/* results */
	struct uffdm_stats stats;
	size_t lost, dup, bad;	/* pages never faulted, faulted twice, wrong content */
	char why[512];		/* what failed, when e2e_run does not return 0 */
};

int e2e_run(struct e2e *e);
/* e2e_run in a test: skips on an empty pool, checks every count. */
void e2e_check(const struct mem_case *mc, struct e2e *e);
