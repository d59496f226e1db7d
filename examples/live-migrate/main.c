// SPDX-License-Identifier: LGPL-2.1-or-later
/* lm: command line, sockets, the report. */
#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "lm.h"

#define DEFAULT_ADDR "127.0.0.1:4513"

static void usage(FILE *f)
{
	fprintf(f,
"usage: lm run|source|dest [options]     migrate a workload's memory over TCP\n"
"       lm keygen FILE                   a new shared key for both ends\n"
"       lm resume FILE [--after S]       run a workload a source kept (exit 8)\n"
"  run                  source and destination on this machine (loopback)\n"
"  source --to H:P      connect to a destination (needs --key)\n"
"  dest --listen H:P    wait for a source (default " DEFAULT_ADDR ")\n"
"  --key FILE           the shared key (lm keygen); dest without it prints one.\n"
"                       It proves who is who, and every frame after the\n"
"                       handshake is encrypted under keys of that connection\n"
"  --plaintext          frames authenticated but NOT encrypted: the memory\n"
"                       crosses the network in clear (warns; both ends must ask)\n"
"  --max-size N[KMG]    dest: the largest region it accepts (default: --size when\n"
"                       given, else the free memory; never more than the room\n"
"                       its cgroup or the huge page pool leaves)\n"
"  --mode M             minor (default), stop-copy, postcopy-missing\n"
"  --size N[KMG]        region size (default 64M)\n"
"  --backing B          shmem (default) or hugetlb\n"
"  --threads N          workload threads (default 2)\n"
"  --pattern P          uniform (default) or hot\n"
"  --hot-frac F         hot set, a fraction of memory (default 0.1)\n"
"  --hot-share PCT      writes that go to the hot set (default 90)\n"
"  --stale F            shorthand: every write in a hot set of fraction F\n"
"  --rate OPS           writes per second per thread (default: flat out)\n"
"  --rounds N           precopy rounds (default 3)\n"
"  --track T            auto (default), pagemap-scan, soft-dirty, uffd-wp, none\n"
"  --bandwidth R[kMG]   link rate in bits/s (default unlimited)\n"
"  --rtt T[us|ms|s]     link round trip (same machine only: it uses send times)\n"
"  --precopy S          workload seconds before the first round (default 1)\n"
"  --after S            workload seconds after resume (default 1)\n"
"  --verify             hash every page at pause; check it where first visible\n"
"  --json               the report as JSON\n"
"  --row                the report as one table row (see 'lm row-header')\n"
"  --plot FILE.png      a timeline of transfer rate and fault latency (gnuplot)\n"
"  --timeout MS         a connection idle this long is dead (default 10000);\n"
"                       connect and name lookup give up after it too;\n"
"                       dest waits for its source's first connection unbounded\n"
"  --rejoin MS|wait     a link broken after the switch-over may come back within\n"
"                       MS (default --timeout); 'wait': until the operator\n"
"                       interrupts (twice: the workload is abandoned)\n"
"  --handler-threads N  destination fault handler threads (default 2)\n"
"  --no-drain           pause without waiting for the link to empty (to measure\n"
"                       what the drain saves)\n"
"  --listen-fd N        dest: an inherited listening socket (tests)\n"
"  --checkpoint FILE    source: where the paused workload is kept when the\n"
"                       outcome stays unknown after SWITCH (default\n"
"                       lm-checkpoint-PID in the working directory)\n"
"  -q, --quiet          no progress lines\n"
"exit: 0 ok, 1 usage or refused, 2 aborted (source resumed), 3 source lost\n"
"      mid-postcopy, 4 verification failed, 5 protocol error, 6 peer lost or\n"
"      stopped answering, 7 wrong key, 8 outcome unknown (source: after SWITCH\n"
"      no verdict came; the workload is kept paused in --checkpoint FILE:\n"
"      'lm resume FILE' runs it, if the destination did not), 11 as 8 but the\n"
"      checkpoint could not be written (the workload is lost on this side),\n"
"      10 the region does not fit: the cgroup's room (v2 memory.max less\n"
"      memory.current, v1 memory.limit_in_bytes less memory.usage_in_bytes)\n"
"      or no free huge pages (raise /sys/kernel/mm/hugepages/*/nr_hugepages)\n");
}

static int __attribute__((format(printf, 1, 2))) die_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "lm: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (try lm --help)\n");
	exit(LM_EXIT_USAGE);
}

void lm_msg(const struct lm_opts *o, const char *fmt, ...)
{
	va_list ap;

	if (o->quiet)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "lm: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/*
 * Test hooks: die-PHASE exits at once (a killed peer), stop-PHASE stops the
 * process as SIGSTOP would (a peer that stops answering, then is continued).
 */
void lm_inject(const struct lm_opts *o, const char *side, const char *what)
{
	static bool fired;

	if (fired || !o->inject || strcmp(o->inject, what))
		return;
	fired = true;
	fprintf(stderr, "lm: %s: injected %s\n", side, what);
	if (!strncmp(what, "die-", 4))
		_exit(9);
	kill(getpid(), SIGSTOP);
}

uint64_t lm_boot_hash(void)
{
	char id[64] = { 0 };
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	if (f) {
		if (!fgets(id, sizeof(id), f))
			id[0] = 0;
		fclose(f);
	}
	return lm_hash(id, sizeof(id)) | 1;
}

/*
 * "64M", "1G", "1.5k": a finite number with an optional binary or decimal
 * suffix, in [lo, hi], whole when asked.  NaN and infinities never pass.
 */
static double parse_num(const char *s, const char *opt, double k, double lo, double hi,
			bool whole)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || !isfinite(v))
		die_usage("%s needs a number, not '%s'", opt, s);
	switch (*end) {
	case 0: break;
	case 'k': case 'K': v *= k; end++; break;
	case 'm': case 'M': v *= k * k; end++; break;
	case 'g': case 'G': v *= k * k * k; end++; break;
	case 't': case 'T': v *= k * k * k * k; end++; break;
	default: die_usage("%s: bad number suffix in '%s'", opt, s);
	}
	if (*end)
		die_usage("%s: trailing characters in '%s'", opt, s);
	if (!(v >= lo && v <= hi))
		die_usage("%s must be in %.15g..%.15g, not '%s'", opt, lo, hi, s);
	if (whole && v != floor(v))
		die_usage("%s needs a whole number, not '%s'", opt, s);
	return v;
}

static uint64_t parse_time_ns(const char *s)
{
	char *end;
	double v = strtod(s, &end), ns;

	if (end == s || !isfinite(v) || v < 0)
		die_usage("--rtt needs a time like 1ms, not '%s'", s);
	if (!strcmp(end, "us"))
		ns = v * 1e3;
	else if (!strcmp(end, "ms") || !*end)
		ns = v * 1e6;
	else if (!strcmp(end, "s"))
		ns = v * 1e9;
	else
		die_usage("--rtt: unknown unit in '%s'", s);
	if (ns > 10e9)
		die_usage("--rtt must be at most 10 s, not '%s'", s);
	return (uint64_t)ns;
}

#define TiB (1024.0 * 1024 * 1024 * 1024)

enum { O_MODE = 256, O_SIZE, O_BACKING, O_THREADS, O_PATTERN, O_HOTFRAC, O_HOTSHARE,
	O_STALE, O_RATE, O_ROUNDS, O_TRACK, O_BW, O_RTT, O_PRECOPY, O_AFTER, O_VERIFY,
	O_JSON, O_ROW, O_PLOT, O_TIMEOUT, O_HTHREADS, O_INJECT, O_TO, O_LISTEN, O_LISTEN_FD,
	O_KEY, O_MAX_SIZE, O_NO_DRAIN, O_REJOIN, O_PLAINTEXT, O_CHECKPOINT };

static const struct option longopts[] = {
	{ "mode", 1, NULL, O_MODE }, { "size", 1, NULL, O_SIZE },
	{ "backing", 1, NULL, O_BACKING }, { "threads", 1, NULL, O_THREADS },
	{ "pattern", 1, NULL, O_PATTERN }, { "hot-frac", 1, NULL, O_HOTFRAC },
	{ "hot-share", 1, NULL, O_HOTSHARE }, { "stale", 1, NULL, O_STALE },
	{ "rate", 1, NULL, O_RATE }, { "rounds", 1, NULL, O_ROUNDS },
	{ "track", 1, NULL, O_TRACK }, { "bandwidth", 1, NULL, O_BW },
	{ "rtt", 1, NULL, O_RTT }, { "precopy", 1, NULL, O_PRECOPY },
	{ "after", 1, NULL, O_AFTER }, { "verify", 0, NULL, O_VERIFY },
	{ "json", 0, NULL, O_JSON }, { "row", 0, NULL, O_ROW }, { "plot", 1, NULL, O_PLOT },
	{ "timeout", 1, NULL, O_TIMEOUT }, { "handler-threads", 1, NULL, O_HTHREADS },
	{ "inject", 1, NULL, O_INJECT }, { "to", 1, NULL, O_TO },
	{ "listen", 1, NULL, O_LISTEN }, { "listen-fd", 1, NULL, O_LISTEN_FD },
	{ "key", 1, NULL, O_KEY }, { "max-size", 1, NULL, O_MAX_SIZE },
	{ "no-drain", 0, NULL, O_NO_DRAIN }, { "rejoin", 1, NULL, O_REJOIN },
	{ "plaintext", 0, NULL, O_PLAINTEXT }, { "checkpoint", 1, NULL, O_CHECKPOINT },
	{ "quiet", 0, NULL, 'q' }, { "help", 0, NULL, 'h' },
	{ 0 },
};

static void load_key(struct lm_opts *o, const char *path)
{
	char err[200];

	if (lm_key_load(path, o->key, err, sizeof(err))) {
		fprintf(stderr, "lm: --key: %s\n", err);
		exit(LM_EXIT_USAGE);
	}
	o->have_key = true;
}

static void set_opt(struct lm_opts *o, int c, const char *a)
{
	int v;

	switch (c) {
	case O_MODE:
		if ((v = lm_mode_parse(a)) < 0)
			die_usage("unknown --mode '%s'", a);
		o->mode = v;
		break;
	case O_SIZE:
		o->size = (size_t)parse_num(a, "--size", 1024, 8192, 16 * TiB, true);
		o->size_given = true;
		break;
	case O_MAX_SIZE:
		o->max_size = (uint64_t)parse_num(a, "--max-size", 1024, 8192, 16 * TiB, true);
		break;
	case O_BACKING:
		if (strcmp(a, "shmem") && strcmp(a, "hugetlb"))
			die_usage("--backing is shmem or hugetlb, not '%s'", a);
		o->backing = strcmp(a, "shmem") ? UFFDM_HUGETLB : UFFDM_SHMEM;
		break;
	case O_THREADS:
		o->wl.threads = (unsigned int)parse_num(a, "--threads", 1000, 1, WL_MAX_THREADS,
							 true);
		break;
	case O_PATTERN:
		if (strcmp(a, "uniform") && strcmp(a, "hot"))
			die_usage("--pattern is uniform or hot, not '%s'", a);
		o->wl.pattern = strcmp(a, "hot") ? WL_UNIFORM : WL_HOT;
		break;
	case O_HOTFRAC:
		o->wl.hot_frac = parse_num(a, "--hot-frac", 1000, 1e-9, 1, false);
		break;
	case O_HOTSHARE:
		o->wl.hot_share = (unsigned int)parse_num(a, "--hot-share", 1000, 0, 100, true);
		break;
	case O_STALE:
		o->wl.pattern = WL_HOT;
		o->wl.hot_frac = parse_num(a, "--stale", 1000, 1e-9, 1, false);
		o->wl.hot_share = 100;
		break;
	case O_RATE:
		/* omit it for flat out: 0 writes per second is no workload */
		o->wl.rate = (uint64_t)parse_num(a, "--rate", 1000, 1, 1e12, false);
		break;
	case O_ROUNDS:
		o->rounds = (unsigned int)parse_num(a, "--rounds", 1000, 1, 1000, true);
		break;
	case O_TRACK:
		if ((v = lm_track_parse(a)) < 0)
			die_usage("unknown --track '%s'", a);
		o->track = (unsigned int)v;
		break;
	case O_BW:
		/* omit it for an unlimited link; under a byte per second is no link */
		o->bandwidth = (uint64_t)(parse_num(a, "--bandwidth", 1000, 8, 1e15, false) / 8);
		break;
	case O_RTT: o->rtt_ns = parse_time_ns(a); break;
	case O_PRECOPY: o->precopy_s = parse_num(a, "--precopy", 1000, 0, 86400, false); break;
	case O_AFTER: o->after_s = parse_num(a, "--after", 1000, 0, 86400, false); break;
	case O_VERIFY: o->verify = true; break;
	case O_JSON: o->json = true; break;
	case O_ROW: o->row = true; break;
	case O_PLOT: o->plot = a; break;
	case O_TIMEOUT:
		o->timeout_ms = (int)parse_num(a, "--timeout", 1000, 1, 3600000, true);
		break;
	case O_REJOIN:
		o->rejoin_ms = !strcmp(a, "wait") ? -1 :
			       (int)parse_num(a, "--rejoin", 1000, 1, 86400000, true);
		break;
	case O_HTHREADS:
		o->handler_threads = (unsigned int)parse_num(a, "--handler-threads", 1000, 1, 64,
							      true);
		break;
	case O_INJECT: o->inject = a; break;
	case O_CHECKPOINT: o->checkpoint = a; break;
	case O_TO: case O_LISTEN: o->addr = a; break;
	case O_LISTEN_FD:
		o->listen_fd = (int)parse_num(a, "--listen-fd", 1000, 0, 1 << 20, true);
		break;
	case O_KEY: load_key(o, a); break;
	case O_NO_DRAIN: o->no_drain = true; break;
	case O_PLAINTEXT: o->plaintext = true; break;
	case 'q': o->quiet = true; break;
	case 'h': usage(stdout); exit(0);
	default: usage(stderr); exit(LM_EXIT_USAGE);
	}
}

static void check_opts(const struct lm_opts *o)
{
	size_t page = uffdm_backing_page_size(o->backing);

	if (!page || o->size % page)
		die_usage("--size must be a multiple of the page size%s",
			  o->backing == UFFDM_SHMEM ? "" : " (hugetlb: 2 MiB pages)");
	if (o->addr && !strrchr(o->addr, ':'))
		die_usage("address '%s' needs HOST:PORT", o->addr);
	if (o->wl.threads >= o->size / WL_REC)
		die_usage("--threads must be below the record count (%zu in --size)",
			  o->size / WL_REC);
}

/* How long a --listen name may take to resolve: --timeout. */
static int resolve_ms = 10000;

/* A TCP socket for addr, or -1 with a message. */
static int tcp_socket(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
	int fd;

	if (lm_resolve(addr, ss, len, resolve_ms, false))
		return -1;
	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fprintf(stderr, "lm: socket: %s\n", strerror(errno));
	return fd;
}

/*
 * Socket buffers small enough that a receiver slower than the link (a TCG
 * guest hashing pages) holds the sender back instead of letting megabytes
 * queue ahead of SWITCH; accepted sockets inherit the listener's.
 */
#define LM_SOCKBUF (256 << 10)

/* LM_SOCKBUF=BYTES overrides it, 0 leaves the kernel's autotuning: a probe knob. */
int lm_sockbuf(void)
{
	const char *e = getenv("LM_SOCKBUF");

	return e ? atoi(e) : LM_SOCKBUF;
}

/* Strangers may connect many at once: as deep as the door's handshake table. */
#define LM_BACKLOG LM_DOOR_SLOTS

static int listen_on(const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1, buf = lm_sockbuf();

	fd = tcp_socket(addr, &ss, &len);
	if (fd >= 0 && buf > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&ss, len) || listen(fd, LM_BACKLOG)) {
		fprintf(stderr, "lm: cannot listen on %s: %s\n", addr, strerror(errno));
		return -1;
	}
	return fd;
}

/* lm keygen FILE: a new random key, mode 0600, for both ends. */
static int keygen(int argc, char **argv)
{
	uint8_t key[LM_KEYLEN];
	int ret;

	if (argc != 3)
		die_usage("usage: lm keygen FILE");
	lm_key_generate(key);
	ret = lm_key_write(argv[2], key);
	if (ret) {
		fprintf(stderr, "lm: keygen: cannot create %s: %s\n", argv[2], strerror(-ret));
		return LM_EXIT_USAGE;
	}
	return 0;
}

/* dest without --key: a key for this run, printed for the source. */
static void print_new_key(struct lm_opts *o)
{
	char hex[2 * LM_KEYLEN + 1];

	lm_key_generate(o->key);
	o->have_key = true;
	lm_key_hex(o->key, hex);
	fprintf(stderr, "lm: destination: no --key given; this run's key is\n%s\n"
		"lm: on the source: (umask 077; echo %s > lm.key); lm source --key lm.key ...\n",
		hex, hex);
}

/* Source in this process, destination in a child, over loopback. */
static int run_both(const struct lm_opts *o)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	char addr[64];
	int lfd, status, src;
	struct lm_room room;
	pid_t pid;

	/* two regions on this machine, one a side: each end's own check would pass */
	lm_mem_room(&room, o->backing);
	if (!lm_mem_fits(&room, 2 * (uint64_t)o->size, "run (source and destination: twice --size)"))
		return LM_EXIT_NOMEM;
	lfd = listen_on(o->addr ? o->addr : "127.0.0.1:0");
	if (lfd < 0 || getsockname(lfd, (struct sockaddr *)&sa, &len))
		return LM_EXIT_USAGE;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return LM_EXIT_USAGE;
	if (pid == 0) {
		/* it waits for its source without limit: not past our death */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() == 1)
			_exit(LM_EXIT_ABORTED);
		_exit(lm_dest(o, lfd));
	}
	close(lfd);
	src = lm_source(o, addr);
	if (src == LM_EXIT_USAGE || src == LM_EXIT_AUTH)
		kill(pid, SIGTERM);	/* it would wait for a source that never comes */
	if (waitpid(pid, &status, 0) < 0)
		return LM_EXIT_USAGE;
	if (src == LM_EXIT_ABORTED || src == LM_EXIT_USAGE || src == LM_EXIT_AUTH)
		return src;
	if (!WIFEXITED(status)) {
		fprintf(stderr, "lm: the destination died (signal %d)\n", WTERMSIG(status));
		return LM_EXIT_PROTOCOL;
	}
	return WEXITSTATUS(status) ? WEXITSTATUS(status) : src;
}

int lm_main(int argc, char **argv)
{
	struct lm_opts o = {
		.mode = LM_MODE_MINOR, .backing = UFFDM_SHMEM, .size = 64u << 20,
		.wl = { .threads = 2, .pattern = WL_UNIFORM, .hot_frac = 0.1, .hot_share = 90 },
		.rounds = 3, .track = LM_TRACK_END, .precopy_s = 1, .after_s = 1,
		.timeout_ms = 10000, .handler_threads = 2, .listen_fd = -1,
	};
	const char *cmd;
	int c, lfd;

	if (argc < 2)
		die_usage("a subcommand is needed: run, source, dest, keygen or row-header");
	cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "keygen"))
		return lm_crypto_init() ? LM_EXIT_USAGE : keygen(argc, argv);
	optind = 2;
	while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1)
		set_opt(&o, c, optarg);
	/* resume takes its FILE among the options */
	if (!strcmp(cmd, "resume") && optind + 1 != argc)
		die_usage("usage: lm resume FILE [--after S]");
	if (optind < argc && strcmp(cmd, "resume"))
		die_usage("unexpected argument '%s'", argv[optind]);
	signal(SIGPIPE, SIG_IGN);
	if (lm_crypto_init()) {
		fprintf(stderr, "lm: libsodium failed to initialise\n");
		return LM_EXIT_USAGE;
	}
	if (!strcmp(cmd, "resume"))
		return lm_resume(&o, argv[optind]);
	if (!strcmp(cmd, "row-header")) {
		lm_report_print(NULL, &o);
		return 0;
	}
	check_opts(&o);
	resolve_ms = o.timeout_ms;
	if (o.plaintext)
		fprintf(stderr, "lm: warning: --plaintext: if the other end asks for it too, the "
			"workload's memory crosses the network in clear (frames stay "
			"authenticated)\n");
	lm_catch_interrupts();
	if (!strcmp(cmd, "run")) {
		/* both ends are ours: a key for this run only */
		if (!o.have_key)
			lm_key_generate(o.key);
		o.have_key = true;
		return run_both(&o);
	}
	if (!strcmp(cmd, "source")) {
		if (!o.have_key) {
			fprintf(stderr, "lm: source: --key FILE is needed: the destination's key "
				"(its --key file, or the key 'lm dest' printed)\n");
			return LM_EXIT_USAGE;
		}
		return lm_source(&o, o.addr ? o.addr : DEFAULT_ADDR);
	}
	if (!strcmp(cmd, "dest")) {
		/* listening first: a failed start prints no secret */
		lfd = o.listen_fd >= 0 ? o.listen_fd : listen_on(o.addr ? o.addr : DEFAULT_ADDR);
		if (lfd < 0)
			return LM_EXIT_USAGE;
		if (!o.have_key)
			print_new_key(&o);
		return lm_dest(&o, lfd);
	}
	return die_usage("unknown subcommand '%s'", cmd);
}
