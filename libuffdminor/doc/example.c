/* Serve the minor faults of a 16-page shmem region with two handler threads. */
#include <stdio.h>
#include <string.h>
#include <uffdminor.h>

#define NPAGES 16

/*
 * Make the page right through the backing view; the library maps and
 * wakes.  It runs once per page, however many threads fault on it.
 */
static int fill(void *arg, struct uffdm_region *r, size_t off, const struct uffdm_event *ev)
{
	char *page = (char *)uffdm_region_backing(r) + off;

	(void)arg;
	(void)ev;
	snprintf(page, 64, "page %zu", off / uffdm_region_page_size(r));
	return 0;
}

int main(void)
{
	struct uffdm_handler_config cfg = { .threads = 2, .fault = fill };
	struct uffdm_handler *h;
	struct uffdm_region *r;
	struct uffdm_stats st;
	struct uffdm *u;
	char why[512], want[64];
	size_t page = uffdm_backing_page_size(UFFDM_SHMEM);
	int ret;

	ret = uffdm_open(&u, 0, 0);
	if (ret) {
		uffdm_open_explain(why, sizeof(why));
		fprintf(stderr, "userfaultfd: %s: %s\n", strerror(-ret), why);
		return 1;
	}
	ret = uffdm_region_create(&r, UFFDM_SHMEM, NPAGES * page);
	if (!ret)	/* minor faults need the pages in the page cache */
		ret = uffdm_region_populate(r, 0, NPAGES * page);
	if (!ret)
		ret = uffdm_region_register(u, r, 0, NULL);
	if (!ret)
		ret = uffdm_handler_start(&h, u, r, &cfg);
	if (ret) {
		fprintf(stderr, "setup: %s\n", strerror(-ret));
		return 1;
	}
	for (size_t i = 0; i < NPAGES; i++) {
		const char *p = (const char *)uffdm_region_view(r) + i * page;

		snprintf(want, sizeof(want), "page %zu", i);
		if (strcmp(p, want)) {	/* the first touch faults */
			fprintf(stderr, "page %zu: \"%s\"\n", i, p);
			return 1;
		}
	}
	uffdm_handler_stop(h, &st);
	printf("%llu pages filled, %llu faults, p50 %llu ns, p99 %llu ns\n",
	       (unsigned long long)st.fills, (unsigned long long)st.minor,
	       (unsigned long long)st.p50_ns,
	       (unsigned long long)st.p99_ns);
	/* The teardown order: handler, registration, descriptor, region. */
	uffdm_region_unregister(u, r);
	uffdm_close(u);
	uffdm_region_destroy(r);
	return st.fills == NPAGES ? 0 : 1;
}
