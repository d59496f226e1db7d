// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * lm-dirty: the guest lm-qemu-anchor boots in QEMU, a flat multiboot image
 * with nothing else in it.  It writes every page of the guest's memory
 * once, says READY on the serial port, then rewrites a hot set of
 * hot=N pages for ever, the way lm's workload rewrites its hot set with
 * --stale: so QEMU and lm move the same memory with the same stale set.
 *
 * No kernel: booting one under TCG costs seconds, and none is installed
 * on a build machine; what QEMU migrates (RAM and its devices) is the
 * same whatever runs in the guest.  32-bit protected mode as multiboot
 * leaves it, no paging and no interrupts: addresses are physical, so a
 * guest of up to 2 GiB lies below the PCI hole.
 *
 * It also checks the migration, as lm's --verify does for lm: every
 * pass writes the pass number into word 0 of each hot page after checking
 * that the page holds the previous one, and each pass checks a slice of
 * the cold pages against what the fill wrote.  A write the migration lost
 * shows as "LOST" (a hot page) or "CORRUPT" (a cold one) on the
 * destination; each full sweep of the cold pages prints "SWEEP", so two
 * SWEEP lines on the destination mean every page was looked at there.
 *
 * Kernel command line (QEMU's -append): hot=PAGES sweep=PASSES.
 */
#include <stdint.h>

#define PAGE		4096u
#define WORDS		(PAGE / 4)
#define MB_BOOTED	0x2BADB002u
#define SIG		0x6c6d6431u	/* "lmd1": a cold page's word 0 is SIG ^ its number */
#define COM1		0x3f8

/*
 * The header QEMU looks for in the first 8 KiB: magic, flags (bit 1: give
 * memory info; bit 16: the load addresses below are valid, so the image
 * may be flat, not ELF), checksum, then the addresses; and the entry.
 */
__asm__(".section .multiboot, \"a\"\n"
	".align 4\n"
	"mb_header:\n"
	".long 0x1BADB002, 0x00010002, -(0x1BADB002 + 0x00010002)\n"
	".long mb_header, __image_start, _edata, _end, _start\n"
	".text\n"
	".globl _start\n"
	"_start:\n"
	"	mov $stack_top, %esp\n"
	"	push %ebx\n"
	"	push %eax\n"
	"	call dirty_main\n"
	"1:	hlt\n"
	"	jmp 1b\n");

extern char _end[];
static uint8_t stack[16384] __attribute__((aligned(16), used));
__asm__(".globl stack_top\n.set stack_top, stack + 16384\n");

struct mb_info {
	uint32_t flags, mem_lower, mem_upper, boot_device, cmdline;
};

static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline uint8_t inb(uint16_t port)
{
	uint8_t v;

	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static void putc_serial(char c)
{
	while (!(inb(COM1 + 5) & 0x20))	/* transmitter holding register empty */
		;
	outb(COM1, (uint8_t)c);
}

static void puts_serial(const char *s)
{
	while (*s)
		putc_serial(*s++);
}

static void put_num(uint32_t v)
{
	char buf[12];
	int n = 0;

	do {
		buf[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		putc_serial(buf[--n]);
}

/* "key=123" anywhere on the command line, else def. */
static uint32_t arg(const char *cmdline, const char *key, uint32_t def)
{
	for (const char *p = cmdline; p && *p; p++) {
		const char *k = key, *q = p;
		uint32_t v = 0;

		while (*k && *q == *k)
			k++, q++;
		if (*k || (p != cmdline && p[-1] != ' '))
			continue;
		while (*q >= '0' && *q <= '9')
			v = v * 10 + (uint32_t)(*q++ - '0');
		return v;
	}
	return def;
}

struct dirt {
	uint32_t *base;		/* the first page we own */
	uint32_t pages, hot, sweep_len;
	uint32_t lost, corrupt;
};

static uint32_t *page(const struct dirt *d, uint32_t i)
{
	return d->base + i * WORDS;
}

/* A few lines, not a flood: the count goes into every SWEEP line. */
static void complain(const char *what, uint32_t count, uint32_t i, uint32_t got, uint32_t want)
{
	if (count > 8)
		return;
	puts_serial(what);
	puts_serial(" page ");
	put_num(i);
	puts_serial(" has ");
	put_num(got);
	puts_serial(" want ");
	put_num(want);
	puts_serial("\n");
}

/* Every page nonzero, so QEMU sends each one in full, as lm sends its region. */
static void fill(const struct dirt *d)
{
	for (uint32_t i = 0; i < d->pages; i++) {
		uint32_t *w = page(d, i);

		w[0] = i < d->hot ? 0 : SIG ^ i;
		w[WORDS - 1] = ~(SIG ^ i);
	}
}

static void check_cold(struct dirt *d, uint32_t from, uint32_t n)
{
	for (uint32_t i = from; i < from + n && i < d->pages; i++) {
		const uint32_t *w = page(d, i);

		if (w[0] != (SIG ^ i) || w[WORDS - 1] != ~(SIG ^ i))
			complain("CORRUPT", ++d->corrupt, i, w[0], SIG ^ i);
	}
}

static void sweep_line(const struct dirt *d, uint32_t sweeps, uint32_t gen)
{
	puts_serial("SWEEP ");
	put_num(sweeps);
	puts_serial(" pass ");
	put_num(gen);
	puts_serial(" lost ");
	put_num(d->lost);
	puts_serial(" corrupt ");
	put_num(d->corrupt);
	puts_serial("\n");
}

static void __attribute__((noreturn)) dirty(struct dirt *d)
{
	uint32_t cold = d->pages - d->hot, slice = cold / d->sweep_len + 1;
	uint32_t next = d->hot, sweeps = 0;

	for (uint32_t gen = 1;; gen++) {
		for (uint32_t i = 0; i < d->hot; i++) {
			uint32_t *w = page(d, i);

			if (w[0] != gen - 1)
				complain("LOST", ++d->lost, i, w[0], gen - 1);
			w[0] = gen;
		}
		check_cold(d, next, slice);
		next += slice;
		if (next >= d->pages) {
			next = d->hot;
			sweep_line(d, ++sweeps, gen);
		}
	}
}

void dirty_main(uint32_t magic, const struct mb_info *mbi);

void dirty_main(uint32_t magic, const struct mb_info *mbi)
{
	const char *cmdline = mbi->flags & 4 ? (const char *)mbi->cmdline : "";
	uintptr_t base = ((uintptr_t)_end + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
	uintptr_t top = 0x100000 + (uintptr_t)mbi->mem_upper * 1024;
	struct dirt d = { .base = (uint32_t *)base };

	if (magic != MB_BOOTED || !(mbi->flags & 1)) {
		puts_serial("lm-dirty: not started by a multiboot loader with memory info\n");
		return;
	}
	d.pages = (uint32_t)((top - base) / PAGE);
	d.hot = arg(cmdline, "hot=", d.pages / 10);
	d.sweep_len = arg(cmdline, "sweep=", 256);
	if (d.hot > d.pages)
		d.hot = d.pages;
	if (!d.sweep_len)
		d.sweep_len = 1;
	fill(&d);
	puts_serial("READY pages ");
	put_num(d.pages);
	puts_serial(" hot ");
	put_num(d.hot);
	puts_serial("\n");
	dirty(&d);
}
