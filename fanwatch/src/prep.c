// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A setup batch on two threads. The helper and the caller take children
 * from one counter; the caller then waits for the helper to leave the
 * batch (at most the one child it is on), or takes the batch back if the
 * helper never came for it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "prep.h"

struct batch {
	const struct fw_prep_parent *par;
	struct fw_prep *v;
	size_t n;
	size_t next;			/* atomic: the next child to take */
	bool helper_done;		/* atomic: the helper left the batch */
};

/*
 * The helper waits for the next batch spinning for SPIN_NS first: between
 * two batches the caller only enters a batch in the map (some 100 us), and
 * a futex wake-up costs as much on a virtual machine, which left the
 * helper a third of the work. Then it sleeps (the rest of the run).
 */
#define SPIN_NS		500000

struct fw_prepper {
	pthread_t tid;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct batch *batch;		/* atomic: posted, not yet taken */
	bool sleeping;			/* atomic: the helper waits on cond */
	bool quit;			/* atomic */
};

bool fw_is_simple_fs(long type)
{
	switch ((unsigned long)type) {
	case 0xEF53:		/* ext2/3/4 */
	case 0x58465342:	/* xfs */
	case 0x01021994:	/* tmpfs */
		return true;
	default:
		return false;
	}
}

static void prep_one(const struct fw_prep_parent *par, struct fw_prep *e)
{
	struct statfs sf;
	struct stat st;

	e->leaf = false;
	e->fd = openat(par->pfd, e->name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (e->fd < 0)
		goto fail;
	e->fh.handle_bytes = sizeof(e->fh_data);
	if (name_to_handle_at(e->fd, "", &e->fh, &e->mnt, AT_EMPTY_PATH))
		goto fail;
	if (par->simple_fs && par->mnt == e->mnt) {
		e->fsid[0] = par->fsid[0];
		e->fsid[1] = par->fsid[1];
		e->simple_fs = true;
	} else if (!fstatfs(e->fd, &sf)) {
		memcpy(e->fsid, &sf.f_fsid, sizeof(e->fsid));
		e->simple_fs = fw_is_simple_fs(sf.f_type);
	} else {
		goto fail;
	}
	/* through "." (an O_PATH fd alone is EBADF to fanotify_mark) */
	if (fanotify_mark(par->fan, par->flags, par->mask, e->fd, "."))
		goto fail;
	/* read after the mark: a subdirectory made since is reported by its event */
	e->leaf = e->simple_fs && !fstat(e->fd, &st) && st.st_nlink == 2;
	e->err = 0;
	/*
	 * A leaf is not listed: its fd would only churn the cache (one close
	 * per directory on the caller's thread); found again by name and
	 * handle if ever needed.
	 */
	if (e->leaf && !par->keep_leaf_fd) {
		close(e->fd);
		e->fd = -1;
	}
	return;
fail:
	e->err = errno;
	if (e->fd >= 0)
		close(e->fd);
	e->fd = -1;
}

static void take(struct batch *b)
{
	size_t i;

	while ((i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED)) < b->n)
		prep_one(b->par, &b->v[i]);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

static struct batch *next_batch(struct fw_prepper *p)
{
	uint64_t until = now_ns() + SPIN_NS;
	struct batch *b;

	do {
		b = __atomic_exchange_n(&p->batch, NULL, __ATOMIC_SEQ_CST);
		if (b || __atomic_load_n(&p->quit, __ATOMIC_SEQ_CST))
			return b;
		cpu_relax();
	} while (now_ns() < until);
	pthread_mutex_lock(&p->lock);
	__atomic_store_n(&p->sleeping, true, __ATOMIC_SEQ_CST);
	while (!(b = __atomic_exchange_n(&p->batch, NULL, __ATOMIC_SEQ_CST)) &&
	       !__atomic_load_n(&p->quit, __ATOMIC_SEQ_CST))
		pthread_cond_wait(&p->cond, &p->lock);
	__atomic_store_n(&p->sleeping, false, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&p->lock);
	return b;
}

static void *helper(void *arg)
{
	struct fw_prepper *p = arg;
	struct batch *b;

	while ((b = next_batch(p))) {
		take(b);
		/* the caller's batch may be gone once this is seen */
		__atomic_store_n(&b->helper_done, true, __ATOMIC_RELEASE);
	}
	return NULL;
}

struct fw_prepper *fw_prepper_new(void)
{
	struct fw_prepper *p;
	sigset_t all, old;
	cpu_set_t cpus;

	/* a second thread only pays where a second CPU runs it */
	if (sched_getaffinity(0, sizeof(cpus), &cpus) || CPU_COUNT(&cpus) < 2)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	/* signals stay the main thread's */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (pthread_create(&p->tid, NULL, helper, p)) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		free(p);
		return NULL;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return p;
}

void fw_prepper_free(struct fw_prepper *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	__atomic_store_n(&p->quit, true, __ATOMIC_SEQ_CST);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->tid, NULL);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

void fw_prep_run(struct fw_prepper *p, const struct fw_prep_parent *par,
		 struct fw_prep *v, size_t n)
{
	struct batch b = { .par = par, .v = v, .n = n }, *posted = &b;

	if (!p || n < 2) {
		take(&b);
		return;
	}
	__atomic_store_n(&p->batch, &b, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&p->sleeping, __ATOMIC_SEQ_CST)) {
		pthread_mutex_lock(&p->lock);
		pthread_cond_signal(&p->cond);
		pthread_mutex_unlock(&p->lock);
	}
	take(&b);
	/* taken back if the helper never took it, else wait for its last child */
	if (__atomic_compare_exchange_n(&p->batch, &posted, NULL, false,
					__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		return;
	for (unsigned int i = 0; !__atomic_load_n(&b.helper_done, __ATOMIC_ACQUIRE); i++) {
		if (i < 1000)
			cpu_relax();
		else
			sched_yield();	/* the helper is off its CPU: a busy machine */
	}
}
