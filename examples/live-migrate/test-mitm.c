// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A man in the middle: a relay between source and destination reads whole
 * frames and, on the main connection's first postcopy push, flips a byte of
 * a page, replays the frame, drops it or swaps it with the next.  Every
 * cell: the destination refuses the frame by name and, since nobody can say
 * who sent it, drops the link as if it had been cut; the source rejoins
 * (fresh keys), resends what is missing, and every page matches.
 *
 * The same relay records: what crosses the wire of a whole migration holds
 * no workload magic and no page -- no 4 KiB of a PAGES frame is a workload
 * record (its checksum holds for every record in clear, for 2^-64 of random
 * bytes) -- unless both ends ask for --plaintext, which the same scan then
 * sees; one end asking alone changes nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <cmocka.h>
#include <k513-test.h>

#include "lm.h"
#include "test-util.h"

#define DERR lmt_path("mitm-dest.err")
#define SERR lmt_path("mitm-src.err")

enum act { FLIP, REPLAY, DROP, REORDER, CAPTURE };

static const uint64_t wl_magic = 0x4b353133574c3031ull;	/* workload.c's WL_MAGIC */

struct mitm {
	int lfd;
	char dest[64];
	enum act act;
	atomic_int done;	/* the act was done */
	atomic_int nconn;
	pthread_t tid;
	/* CAPTURE: bytes seen, workload magics in them, PAGES frames' pages,
	 * and how many of those are workload records in clear */
	atomic_uint_fast64_t bytes, magic, pages, records;
};

struct pipe2 {
	struct mitm *m;
	int from, to;
	bool main_fwd;		/* the main connection, source to destination */
};

static bool put(int fd, const void *b, size_t n)
{
	for (size_t k = 0; k < n; ) {
		ssize_t w = write(fd, (const char *)b + k, n - k);

		if (w <= 0)
			return false;
		k += (size_t)w;
	}
	return true;
}

static bool get(int fd, void *b, size_t n)
{
	for (size_t k = 0; k < n; ) {
		ssize_t r = read(fd, (char *)b + k, n - k);

		if (r <= 0)
			return false;
		k += (size_t)r;
	}
	return true;
}

/* One frame of the source's (its first carries no tag) into b; its length. */
static size_t get_frame(int fd, uint8_t *b, size_t cap, unsigned int nth)
{
	struct lm_hdr h;
	size_t n;

	if (!get(fd, &h, sizeof(h)))
		return 0;
	n = sizeof(h) + h.len + (nth >= lm_clear_frames(true) ? LM_TAGLEN : 0);
	if (n > cap)
		return 0;
	memcpy(b, &h, sizeof(h));
	return get(fd, b + sizeof(h), n - sizeof(h)) ? n : 0;
}

/* Magics in n bytes (a frame, or a chunk of the way back, which carries no page). */
static unsigned int magics(const uint8_t *b, size_t n)
{
	unsigned int k = 0;

	for (const uint8_t *p = b; (p = memmem(p, n - (size_t)(p - b), &wl_magic, 8));
	     p++)
		k++;
	return k;
}

/* Whether 4 KiB are a workload record: its checksum (and owner) hold. */
static bool is_record(const uint8_t *b)
{
	const struct wl_rec *r = (const void *)b;
	uint64_t x = r->counter;

	for (unsigned int i = 0; i < WL_WORDS; i++)
		x ^= r->data[i];
	return x == r->csum && r->owner < WL_MAX_THREADS;
}

/* CAPTURE: what a frame of the source's shows of the memory. */
static void record(struct mitm *m, const uint8_t *b, size_t n)
{
	const struct lm_hdr *h = (const void *)b;
	const uint8_t *data = b + sizeof(*h) + sizeof(struct lm_pages);

	atomic_fetch_add(&m->bytes, n);
	atomic_fetch_add(&m->magic, magics(b, n));
	if (h->type != LM_PAGES || h->len < sizeof(struct lm_pages))
		return;
	for (size_t k = 0; k + 4096 <= h->len - sizeof(struct lm_pages); k += 4096) {
		atomic_fetch_add(&m->pages, 1);
		if (is_record(data + k))
			atomic_fetch_add(&m->records, 1);
	}
}

/* Source to destination, frame by frame; the act on the first push. */
static void *forward(void *arg)
{
	struct pipe2 *p = arg;
	size_t cap = sizeof(struct lm_hdr) + LM_MAX_PAYLOAD + LM_TAGLEN, n, held = 0;
	uint8_t *b = malloc(cap), *keep = malloc(cap);

	for (unsigned int nth = 0; b && keep && (n = get_frame(p->from, b, cap, nth)); nth++) {
		const struct lm_hdr *h = (const void *)b;
		bool target = p->main_fwd && !atomic_load(&p->m->done) && h->type == LM_PAGES &&
			      (h->flags & LM_F_PUSH);
		bool ok = true;

		if (p->m->act == CAPTURE) {
			record(p->m, b, n);
			target = false;
		}
		if (target) {
			atomic_store(&p->m->done, 1);
			switch (p->m->act) {
			case FLIP:
				b[n - LM_TAGLEN - 1] ^= 0x40;	/* the last page's last byte */
				break;
			case REPLAY:
				ok = put(p->to, b, n);
				break;
			case DROP:
				continue;
			case REORDER:
				memcpy(keep, b, n);
				held = n;
				continue;
			case CAPTURE:
				break;
			}
		}
		ok = ok && put(p->to, b, n);
		if (held) {
			ok = ok && put(p->to, keep, held);
			held = 0;
		}
		if (!ok)
			break;
	}
	shutdown(p->to, SHUT_WR);
	free(b);
	free(keep);
	return NULL;
}

static void *backward(void *arg)
{
	struct pipe2 *p = arg;
	uint8_t b[65536];
	ssize_t r;

	while ((r = read(p->from, b, sizeof(b))) > 0 && put(p->to, b, (size_t)r)) {
		atomic_fetch_add(&p->m->bytes, (uint64_t)r);
		atomic_fetch_add(&p->m->magic, magics(b, (size_t)r));
	}
	shutdown(p->to, SHUT_WR);
	return NULL;
}

/* Accept up to 4 connections (main, urgent, perhaps a rejoin's), relay each. */
static void *mitm_main(void *arg)
{
	struct mitm *m = arg;
	struct pipe2 pp[8];
	pthread_t t[8];
	int n = 0;

	while (n < 8) {
		int c = accept(m->lfd, NULL, NULL), d;

		if (c < 0)
			break;
		d = lm_connect(m->dest);
		if (d < 0) {
			close(c);
			break;
		}
		pp[n] = (struct pipe2){ m, c, d, atomic_fetch_add(&m->nconn, 1) == 0 };
		pthread_create(&t[n], NULL, forward, &pp[n]);
		n++;
		pp[n] = (struct pipe2){ m, d, c, false };
		pthread_create(&t[n], NULL, backward, &pp[n]);
		n++;
	}
	for (int k = 0; k < n; k++)
		pthread_join(t[k], NULL);
	for (int k = 0; k < n; k += 2) {
		close(pp[k].from);
		close(pp[k].to);
	}
	return NULL;
}

/* A migration through the relay; src_plain, dst_plain: that end has --plaintext. */
static void migrate(struct mitm *m, bool src_plain, bool dst_plain, int *s_rc, int *d_rc)
{
	char daddr[64], maddr[64], lfd_s[16];
	int lfd = lmt_listener(daddr, sizeof(daddr));
	pid_t d, s;

	snprintf(lfd_s, sizeof(lfd_s), "%d", lfd);
	snprintf(m->dest, sizeof(m->dest), "%s", daddr);
	{
		const char *da[] = { "dest", "--key", lmt_key(), "--listen-fd", lfd_s, "--verify",
				     "--timeout", "2000", "--size", "4M",
				     dst_plain ? "--plaintext" : NULL, NULL };

		d = lmt_spawn(DERR, NULL, da);
	}
	close(lfd);
	m->lfd = lmt_listener(maddr, sizeof(maddr));
	{
		const char *sa[] = { "source", "--key", lmt_key(), "--to", maddr, "--verify",
				     "--timeout", "2000", "--rejoin", "1000", "--size", "4M",
				     "--stale", "0.5", "--bandwidth", "200M", "--precopy", "0.2",
				     "--after", "0.3", "--rounds", "2",
				     src_plain ? "--plaintext" : NULL, NULL };

		s = lmt_spawn(SERR, NULL, sa);
	}
	/* after both forks: see test-rejoin.c */
	assert_int_equal(pthread_create(&m->tid, NULL, mitm_main, m), 0);
	*d_rc = lmt_status(d);
	*s_rc = lmt_status(s);
	shutdown(m->lfd, SHUT_RDWR);
	pthread_join(m->tid, NULL);
	close(m->lfd);
	print_message("# source %d, destination %d\n", *s_rc, *d_rc);
}

static void run(enum act act, const char *word)
{
	struct mitm m = { .act = act };
	int s_rc, d_rc;

	migrate(&m, false, false, &s_rc, &d_rc);
	assert_true(atomic_load(&m.done));
	assert_true(lmt_file_has(DERR, word));
	assert_true(lmt_file_has(SERR, "rejoined the destination"));
	assert_int_equal(d_rc, LM_EXIT_OK);
	assert_int_equal(s_rc, LM_EXIT_OK);
	assert_true(lmt_file_has(DERR, "1024 verified, 0 mismatched"));
	assert_true(lmt_file_has(DERR, "result      ok (exit 0)"));
}

static void test_flip(void **state)
{
	(void)state;
	run(FLIP, "PAGES frame (seq");
	assert_true(lmt_file_has(DERR, "fails authentication"));
}

static void test_replay(void **state)
{
	(void)state;
	run(REPLAY, "replayed or reordered");
}

static void test_drop(void **state)
{
	(void)state;
	run(DROP, "dropped or reordered");
}

static void test_reorder(void **state)
{
	(void)state;
	run(REORDER, "out of sequence");
}

/* A whole migration recorded: what the wire shows of the memory. */
static void capture(bool src_plain, bool dst_plain, struct mitm *m)
{
	int s_rc, d_rc;

	migrate(m, src_plain, dst_plain, &s_rc, &d_rc);
	print_message("# %llu bytes on the wire; %llu pages in PAGES frames, %llu of them "
		      "workload records in clear; the workload's magic %llu times\n",
		      (unsigned long long)m->bytes, (unsigned long long)m->pages,
		      (unsigned long long)m->records, (unsigned long long)m->magic);
	assert_int_equal(s_rc, LM_EXIT_OK);
	assert_int_equal(d_rc, LM_EXIT_OK);
	assert_true(m->pages >= 1024);
}

static void test_capture(void **state)
{
	struct mitm m = { .act = CAPTURE };

	(void)state;
	capture(false, false, &m);
	assert_int_equal(m.magic, 0);
	assert_int_equal(m.records, 0);
}

/* Both ends asked: in clear (the control: the scan sees what is there). */
static void test_capture_plaintext(void **state)
{
	struct mitm m = { .act = CAPTURE };

	(void)state;
	capture(true, true, &m);
	assert_true(m.magic > 0);
	assert_true(m.records > m.pages / 2);
	assert_true(lmt_file_has(SERR, "warning: --plaintext"));
	assert_true(lmt_file_has(DERR, "warning: --plaintext"));
}

/* One end alone gets no plaintext: a network cannot talk the other one down. */
static void test_capture_plaintext_one_end(void **state)
{
	struct mitm m = { .act = CAPTURE };

	(void)state;
	capture(true, false, &m);
	assert_int_equal(m.magic, 0);
	assert_int_equal(m.records, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flip),
		cmocka_unit_test(test_replay),
		cmocka_unit_test(test_drop),
		cmocka_unit_test(test_reorder),
		cmocka_unit_test(test_capture),
		cmocka_unit_test(test_capture_plaintext),
		cmocka_unit_test(test_capture_plaintext_one_end),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
