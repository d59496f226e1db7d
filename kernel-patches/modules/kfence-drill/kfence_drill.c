// SPDX-License-Identifier: GPL-2.0
/*
 * kfence_drill - commit, on request, each heap bug class KFENCE detects.
 *
 * A fleet that turns KFENCE on wants to know that its kernel catches bugs
 * and that its tooling reads the reports. Writing a class name to
 * /sys/kernel/debug/kfence_drill/fire allocates until KFENCE owns the
 * object (as mm/kfence/kfence_test.c does), then commits that bug:
 *
 *   oob_read oob_write    one byte past the object, on its guard-page side
 *   redzone_write         one byte into the in-page redzone, found at free
 *   uaf_read uaf_write    after kfree()
 *   invalid_free          kfree() of a pointer inside the object
 *   double_free           kfree() twice
 *
 * The write fails with -ETIMEDOUT when KFENCE hands out no object in time
 * (it is off, or its pool is full), and with -EIO when the bug was
 * committed but KFENCE reported nothing: a drill that "passes" without a
 * report would hide a broken detector. Reports are counted on the
 * error_report_end tracepoint, which KFENCE fires once per report, right
 * after bumping its "total bugs" counter (that counter is not exported).
 *
 * Writing anything to "chance" commits a use-after-free read on a single
 * ordinary allocation, as a real bug would: only KFENCE's sampling decides
 * whether it is caught. "attempts" and "hits" count those allocations and
 * how many KFENCE owned. On a KASAN kernel "chance" is refused
 * (-EOPNOTSUPP): KASAN would report every miss of KFENCE's sampling.
 *
 * The bug-committing functions are noinline and named drill_*: report
 * titles name the first frame outside the allocator, and frame filters
 * (syzkaller's) skip names containing kmalloc, slab_, kmem_cache or lock.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/debugfs.h>
#include <linux/jiffies.h>
#include <linux/kfence.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <trace/events/error_report.h>

#ifndef CONFIG_KFENCE
#error "kfence_drill needs a kernel built with CONFIG_KFENCE=y"
#endif
#ifndef CONFIG_TRACEPOINTS
#error "kfence_drill counts KFENCE reports on a tracepoint: it needs CONFIG_TRACEPOINTS=y"
#endif

/*
 * The object size asked for. An object KFENCE places at the right end of
 * its page need not end at the guard page: KFENCE aligns it to the cache's
 * alignment (arm64 6.1 aligns kmalloc to 128 bytes), so the guard page is
 * found from the page boundary, never from the size.
 */
#define DRILL_SIZE 32

static unsigned int timeout_ms;
module_param(timeout_ms, uint, 0644);
MODULE_PARM_DESC(timeout_ms,
		 "how long to allocate waiting for a KFENCE object (0: 100 sample intervals, at least 1 s)");

static struct dentry *drill_dir;
static atomic_t chance_attempts = ATOMIC_INIT(0);
static atomic_t chance_hits = ATOMIC_INIT(0);
static atomic_long_t kfence_reports = ATOMIC_LONG_INIT(0);

static void drill_count_report(void *data, enum error_detector detector,
			       unsigned long id)
{
	if (detector == ERROR_DETECTOR_KFENCE)
		atomic_long_inc(&kfence_reports);
}

static unsigned long drill_timeout(void)
{
	unsigned long ms = timeout_ms;

	if (!ms)
		ms = max(100 * READ_ONCE(kfence_sample_interval), 1000UL);
	return msecs_to_jiffies(ms);
}

/*
 * Allocate until KFENCE owns the object. KFENCE guards one allocation per
 * sample interval system-wide; the rest are freed again at once.
 */
static noinline char *drill_get_object(void)
{
	unsigned long deadline = jiffies + drill_timeout();
	unsigned long tries = 0;
	char *p;

	do {
		p = kmalloc(DRILL_SIZE, GFP_KERNEL);
		if (!p)
			return ERR_PTR(-ENOMEM);
		if (is_kfence_address(p))
			return p;
		kfree(p);
		tries++;
		cond_resched();
	} while (time_before(jiffies, deadline));

	pr_warn("no KFENCE object after %lu allocations in %u ms (sample_interval=%lu ms): is KFENCE on?\n",
		tries, jiffies_to_msecs(drill_timeout()),
		READ_ONCE(kfence_sample_interval));
	return ERR_PTR(-ETIMEDOUT);
}

/*
 * KFENCE puts the object at a random end of its page. A left-aligned
 * object starts at the page boundary, so the byte before it is on the
 * guard page; a right-aligned one ends at most one alignment unit before
 * the next boundary, which is the first byte of the guard page.
 */
static bool drill_left_aligned(const char *p)
{
	return offset_in_page(p) == 0;
}

static char *drill_guarded_byte(char *p)
{
	if (drill_left_aligned(p))
		return p - 1;
	return (char *)PAGE_ALIGN((unsigned long)p + 1);
}

static char *drill_redzone_byte(char *p)
{
	return drill_left_aligned(p) ? p + DRILL_SIZE : p - 1;
}

/*
 * Free the object without a tail call, so the calling drill_* frame stays
 * on the stack KFENCE prints: a report found at free is titled by it.
 */
static __always_inline void drill_free(const void *p)
{
	kfree(p);
	barrier();
}

static noinline void drill_oob_read(char *p)
{
	pr_info("out-of-bounds read at %s of object\n",
		drill_left_aligned(p) ? "left" : "right");
	(void)READ_ONCE(*drill_guarded_byte(p));
	drill_free(p);
}

static noinline void drill_oob_write(char *p)
{
	pr_info("out-of-bounds write at %s of object\n",
		drill_left_aligned(p) ? "left" : "right");
	WRITE_ONCE(*drill_guarded_byte(p), 0x2a);
	drill_free(p);
}

/* KFENCE checks the canary bytes around the object when it is freed. */
static noinline void drill_redzone_write(char *p)
{
	WRITE_ONCE(*drill_redzone_byte(p), 0x2a);
	drill_free(p);
}

static noinline void drill_uaf_read(char *p)
{
	drill_free(p);
	(void)READ_ONCE(*p);
}

static noinline void drill_uaf_write(char *p)
{
	drill_free(p);
	WRITE_ONCE(*p, 0x2a);
}

/* KFENCE refuses the bad free and keeps the object: free it properly. */
static noinline void drill_invalid_free(char *p)
{
	drill_free(p + 1);
	drill_free(p);
}

static noinline void drill_double_free(char *p)
{
	drill_free(p);
	drill_free(p);
}

static const struct drill_class {
	const char *name;
	void (*commit)(char *p);
} drill_classes[] = {
	{ "oob_read", drill_oob_read },
	{ "oob_write", drill_oob_write },
	{ "redzone_write", drill_redzone_write },
	{ "uaf_read", drill_uaf_read },
	{ "uaf_write", drill_uaf_write },
	{ "invalid_free", drill_invalid_free },
	{ "double_free", drill_double_free },
};

static const struct drill_class *drill_find(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(drill_classes); i++)
		if (!strcmp(name, drill_classes[i].name))
			return &drill_classes[i];
	return NULL;
}

static ssize_t fire_write(struct file *file, const char __user *ubuf,
			  size_t count, loff_t *ppos)
{
	const struct drill_class *class;
	long before;
	char name[32];
	char *p;

	if (count >= sizeof(name))
		return -EINVAL;
	if (copy_from_user(name, ubuf, count))
		return -EFAULT;
	name[count] = '\0';
	class = drill_find(strim(name));
	if (!class)
		return -EINVAL;

	p = drill_get_object();
	if (IS_ERR(p))
		return PTR_ERR(p);
	before = atomic_long_read(&kfence_reports);
	pr_info("committing %s on kfence object %p\n", class->name, p);
	class->commit(p);
	if (atomic_long_read(&kfence_reports) == before) {
		pr_warn("%s was committed on a KFENCE object but KFENCE reported nothing\n",
			class->name);
		return -EIO;
	}
	return count;
}

static const struct file_operations fire_fops = {
	.owner = THIS_MODULE,
	.open = nonseekable_open,
	.write = fire_write,
};

static int classes_show(struct seq_file *m, void *v)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(drill_classes); i++)
		seq_printf(m, "%s\n", drill_classes[i].name);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(classes);

/*
 * One ordinary allocation with a use-after-free read: harmless on a slab
 * object (the read sees freed memory), reported when KFENCE owned it.
 */
static noinline void drill_uaf_chance(void)
{
	char *p = kmalloc(DRILL_SIZE, GFP_KERNEL);

	if (!p)
		return;
	atomic_inc(&chance_attempts);
	if (is_kfence_address(p))
		atomic_inc(&chance_hits);
	kfree(p);
	(void)READ_ONCE(*p);
}

static ssize_t chance_write(struct file *file, const char __user *ubuf,
			    size_t count, loff_t *ppos)
{
	/* Every allocation KFENCE does not sample is one KASAN reports. */
	if (IS_ENABLED(CONFIG_KASAN)) {
		pr_warn_once("chance is refused on a KASAN kernel: KASAN reports every use-after-free KFENCE does not sample\n");
		return -EOPNOTSUPP;
	}
	drill_uaf_chance();
	return count;
}

static const struct file_operations chance_fops = {
	.owner = THIS_MODULE,
	.open = nonseekable_open,
	.write = chance_write,
};

static int __init kfence_drill_init(void)
{
	int ret;

	ret = register_trace_error_report_end(drill_count_report, NULL);
	if (ret) {
		pr_err("cannot count KFENCE reports on error_report_end: %d\n", ret);
		return ret;
	}
	drill_dir = debugfs_create_dir("kfence_drill", NULL);
	debugfs_create_file("fire", 0200, drill_dir, NULL, &fire_fops);
	debugfs_create_file("classes", 0444, drill_dir, NULL, &classes_fops);
	debugfs_create_file("chance", 0200, drill_dir, NULL, &chance_fops);
	debugfs_create_atomic_t("attempts", 0644, drill_dir, &chance_attempts);
	debugfs_create_atomic_t("hits", 0644, drill_dir, &chance_hits);
	return 0;
}

static void __exit kfence_drill_exit(void)
{
	debugfs_remove(drill_dir);
	unregister_trace_error_report_end(drill_count_report, NULL);
	tracepoint_synchronize_unregister();
}

module_init(kfence_drill_init);
module_exit(kfence_drill_exit);

MODULE_DESCRIPTION("Commit each heap bug class KFENCE detects, on request");
MODULE_LICENSE("GPL");
