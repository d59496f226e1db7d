// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * uffdm-epoll: the fill-once handler driven from the application's own
 * epoll loop (UFFDM_HANDLER_EVENT_LOOP), the way a VMM with one event loop
 * (Firecracker's model) would run it: no library thread.  Two regions of
 * guest memory, each with its slot as the region's user pointer, so the
 * callback needs no lookup; four vCPU threads read every page and check
 * it; the loop serves faults as they become ready, 32 at most per turn, so
 * its other sources (here: "the vCPUs are done") are never starved.
 *
 * Exit 0: every byte right, every page filled once; 1: a check failed;
 * 77: the kernel lacks userfaultfd minor faults on shmem.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <uffdminor.h>

#define NSLOTS	2
#define PAGES	64	/* per slot */
#define VCPUS	4

struct slot {
	struct uffdm_region *r;
	unsigned int id;
	unsigned int fills;	/* only the loop thread writes it */
};

struct vm {
	struct slot slot[NSLOTS];
	size_t page;
	int done_fd;		/* eventfd: a vCPU finished */
	unsigned int bad;
};

static uint8_t byte_of(const struct slot *s, size_t off)
{
	return (uint8_t)(s->id * 131 + off / 4096 * 7 + off % 251);
}

/* The region's user pointer is its slot: no table to search. */
static int fill(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	struct slot *s = uffdm_region_user(r);
	uint8_t *p = (uint8_t *)uffdm_region_backing(r) + off;
	size_t page = uffdm_region_page_size(r);

	(void)arg;
	(void)ev;
	for (size_t i = 0; i < page; i++)
		p[i] = byte_of(s, off + i);
	s->fills++;
	return 0;
}

struct vcpu {
	struct vm *vm;
	unsigned int n;
	pthread_t tid;
};

/* Every page of every slot, in its own order; then tell the loop. */
static void *vcpu_run(void *arg)
{
	struct vcpu *c = arg;
	struct vm *vm = c->vm;
	uint64_t one = 1;

	for (size_t k = 0; k < NSLOTS * PAGES; k++) {
		size_t pg = (k * 7 + c->n * 13) % (NSLOTS * PAGES);
		struct slot *s = &vm->slot[pg / PAGES];
		size_t off = pg % PAGES * vm->page;
		const uint8_t *v = (uint8_t *)uffdm_region_view(s->r) + off;

		for (size_t i = 0; i < vm->page; i += 509)
			if (v[i] != byte_of(s, off + i))
				__atomic_add_fetch(&vm->bad, 1, __ATOMIC_RELAXED);
	}
	if (write(vm->done_fd, &one, sizeof(one)) != sizeof(one))
		__atomic_add_fetch(&vm->bad, 1, __ATOMIC_RELAXED);
	return NULL;
}

static int add_fd(int ep, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/* The application's loop: serve what is ready, until every vCPU is done. */
static int run_loop(struct vm *vm, struct uffdm_handler *h)
{
	int ep = epoll_create1(EPOLL_CLOEXEC), hfd = uffdm_handler_fd(h), ret;
	unsigned int finished = 0;
	struct epoll_event ev[4];
	uint64_t n;

	ret = ep < 0 ? -errno : add_fd(ep, hfd);
	if (!ret)
		ret = add_fd(ep, vm->done_fd);
	while (!ret && finished < VCPUS) {
		int k = epoll_wait(ep, ev, 4, -1);

		if (k < 0 && errno != EINTR)
			ret = -errno;
		for (int i = 0; i < k && !ret; i++) {
			if (ev[i].data.fd == hfd) {
				ret = uffdm_handler_serve(h, 32);
				ret = ret < 0 ? ret : 0;
			} else if (read(vm->done_fd, &n, sizeof(n)) == sizeof(n)) {
				finished += (unsigned int)n;
			}
		}
	}
	if (ep >= 0)
		close(ep);
	return ret;
}

static int make_slots(struct vm *vm, struct uffdm *u)
{
	for (unsigned int i = 0; i < NSLOTS; i++) {
		struct slot *s = &vm->slot[i];
		int ret = uffdm_region_create(&s->r, UFFDM_SHMEM, PAGES * vm->page);

		if (!ret)
			ret = uffdm_region_populate(s->r, 0, PAGES * vm->page);
		if (!ret)
			ret = uffdm_region_register(u, s->r, 0, NULL);
		if (ret)
			return ret;
		s->id = i;
		uffdm_region_set_user(s->r, s);
	}
	return 0;
}

static int check(struct vm *vm, const struct uffdm_stats *st)
{
	unsigned int fills = 0;

	for (unsigned int i = 0; i < NSLOTS; i++)
		fills += vm->slot[i].fills;
	printf("uffdm-epoll: %u pages, %llu fault messages, %u fills, %u bad reads\n",
	       NSLOTS * PAGES, (unsigned long long)st->messages, fills, vm->bad);
	return vm->bad || fills != NSLOTS * PAGES || st->fills != fills ? 1 : 0;
}

int main(void)
{
	struct uffdm_handler_config cfg = {
		.threads = 0, .flags = UFFDM_HANDLER_EVENT_LOOP, .fault = fill,
	};
	struct vm vm = { .page = uffdm_backing_page_size(UFFDM_SHMEM), .done_fd = -1 };
	struct vcpu cpu[VCPUS];
	struct uffdm_handler *h = NULL;
	struct uffdm_stats st = { 0 };
	struct uffdm *u;
	struct uffdm_probe p;
	int ret;

	if (uffdm_probe(&p) || !uffdm_probe_minor_shmem(&p)) {
		fprintf(stderr, "uffdm-epoll: no userfaultfd minor faults on shmem (5.14+)\n");
		return 77;
	}
	ret = uffdm_open(&u, 0, 0);
	if (ret) {
		fprintf(stderr, "uffdm-epoll: uffdm_open: %s\n", strerror(-ret));
		return 77;
	}
	vm.done_fd = eventfd(0, EFD_CLOEXEC);
	ret = vm.done_fd < 0 ? -errno : make_slots(&vm, u);
	for (unsigned int i = 0; !ret && i < NSLOTS; i++)
		ret = i ? uffdm_handler_region_add(h, vm.slot[i].r) :
			  uffdm_handler_start(&h, u, vm.slot[i].r, &cfg);
	for (unsigned int i = 0; !ret && i < VCPUS; i++) {
		cpu[i] = (struct vcpu){ .vm = &vm, .n = i };
		ret = -pthread_create(&cpu[i].tid, NULL, vcpu_run, &cpu[i]);
		if (!ret)
			ret = i + 1 == VCPUS ? run_loop(&vm, h) : 0;
	}
	if (ret) {
		fprintf(stderr, "uffdm-epoll: %s\n", strerror(-ret));
		return 1;	/* a vCPU may wait for ever: no teardown to run */
	}
	for (unsigned int i = 0; i < VCPUS; i++)
		pthread_join(cpu[i].tid, NULL);
	/* the documented teardown */
	uffdm_handler_stop(h, &st);
	for (unsigned int i = 0; i < NSLOTS; i++)
		if (uffdm_region_unregister(u, vm.slot[i].r))
			vm.bad++;
	uffdm_close(u);
	for (unsigned int i = 0; i < NSLOTS; i++)
		uffdm_region_destroy(vm.slot[i].r);
	close(vm.done_fd);
	return check(&vm, &st);
}
