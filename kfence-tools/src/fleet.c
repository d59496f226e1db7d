// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The collector's state: the cursor file, the --summary buckets and the
 * KFENCE statistics.
 */
#include "fleet.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CURSOR_MAGIC "kfence-report-cursor 1"

long long kfr_record_seq(const char *rec)
{
	long long seq;
	int prio;

	return sscanf(rec, "%d,%lld,", &prio, &seq) == 2 ? seq : -1;
}

void kfr_cursor_hold(struct kfr_cursor *c, const char *rec, long long seq)
{
	char **v;

	if (seq < 0 || c->n_held >= KFR_CURSOR_HELD)
		return;
	v = realloc(c->held, (c->n_held + 1) * sizeof(*v));
	/* a record is under 1024 bytes: a longer line is no record's */
	if (!v || !(v[c->n_held] = strndup(rec, KFR_MAX_LINE))) {
		perror("kfence-report");
		exit(1);
	}
	v[c->n_held][strcspn(v[c->n_held], "\n")] = '\0';
	c->held = v;
	c->n_held++;
}

void kfr_cursor_free(struct kfr_cursor *c)
{
	for (size_t i = 0; i < c->n_held; i++)
		free(c->held[i]);
	free(c->held);
	c->held = NULL;
	c->n_held = 0;
}

int kfr_cursor_load(struct kfr_cursor *c, const char *path, const char *boot_id)
{
	FILE *f = fopen(path, "r");
	char *line = NULL, boot[64] = "";
	size_t cap = 0;
	long long v;
	bool magic = false;
	struct kfr_cursor in;

	memset(c, 0, sizeof(*c));
	c->next_seq = -1;
	snprintf(c->boot_id, sizeof(c->boot_id), "%s", boot_id ? boot_id : "");
	if (!f) {
		if (errno == ENOENT)
			return 0;	/* the first run */
		fprintf(stderr, "kfence-report: cannot read cursor '%s': %s\n", path,
			strerror(errno));
		return -1;
	}
	memset(&in, 0, sizeof(in));
	in.next_seq = -1;
	while (getline(&line, &cap, f) >= 0) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, CURSOR_MAGIC))
			magic = true;
		else if (!strncmp(line, "record ", 7))
			kfr_cursor_hold(&in, line + 7, kfr_record_seq(line + 7));
		else if (sscanf(line, "boot_id %63s", boot) == 1)
			;
		else if (sscanf(line, "next_seq %lld", &v) == 1)
			in.next_seq = v;
		else if (sscanf(line, "done %lld", &v) == 1)
			kfr_cursor_mark(&in, v);
		else if (sscanf(line, "emitted %lld", &v) == 1 && v >= 0)
			in.emitted = (unsigned long)v;
		else if (sscanf(line, "suppressed %lld", &v) == 1 && v >= 0)
			in.suppressed = (unsigned long)v;
	}
	free(line);
	fclose(f);
	if (!magic || !boot[0]) {
		kfr_cursor_free(&in);
		fprintf(stderr, "kfence-report: '%s' is not a kfence-report cursor file "
			"(remove it to start from the beginning of the log)\n", path);
		return -1;
	}
	if (boot_id && strcmp(boot, boot_id)) {
		kfr_cursor_free(&in);
		fprintf(stderr, "kfence-report: cursor '%s' is from boot %s, this is boot %s: "
			"reading this boot's log from its start\n", path, boot, boot_id);
		return 1;
	}
	memcpy(in.boot_id, c->boot_id, sizeof(in.boot_id));
	*c = in;
	return 0;
}

int kfr_cursor_save(const struct kfr_cursor *c, const char *path)
{
	char tmp[4096];
	bool bad;
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "kfence-report: cannot write cursor '%s': %s\n", tmp,
			strerror(errno));
		return -1;
	}
	fprintf(f, "%s\nboot_id %s\nnext_seq %lld\nemitted %lu\nsuppressed %lu\n",
		CURSOR_MAGIC, c->boot_id, c->next_seq, c->emitted, c->suppressed);
	for (size_t i = 0; i < c->n_done; i++)
		fprintf(f, "done %lld\n", c->done[i]);
	for (size_t i = 0; i < c->n_held; i++)
		fprintf(f, "record %s\n", c->held[i]);
	bad = fflush(f) || fsync(fileno(f));
	bad |= fclose(f) != 0;
	if (bad || rename(tmp, path)) {
		fprintf(stderr, "kfence-report: cannot write cursor '%s': %s\n", path,
			strerror(errno));
		return -1;
	}
	return 0;
}

bool kfr_cursor_done(const struct kfr_cursor *c, long long seq)
{
	for (size_t i = 0; i < c->n_done; i++)
		if (c->done[i] == seq)
			return true;
	return false;
}

void kfr_cursor_mark(struct kfr_cursor *c, long long seq)
{
	if (seq < 0 || kfr_cursor_done(c, seq))
		return;
	if (c->n_done == KFR_CURSOR_DONE) {
		memmove(c->done, c->done + 1, (KFR_CURSOR_DONE - 1) * sizeof(c->done[0]));
		c->n_done--;
	}
	c->done[c->n_done++] = seq;
}

void kfr_cursor_advance(struct kfr_cursor *c, long long next_seq)
{
	size_t j = 0;

	c->next_seq = next_seq;
	for (size_t i = 0; i < c->n_done; i++)
		if (c->done[i] >= next_seq)
			c->done[j++] = c->done[i];
	c->n_done = j;
	for (size_t i = j = 0; i < c->n_held; i++) {
		if (kfr_record_seq(c->held[i]) >= next_seq)
			c->held[j++] = c->held[i];
		else
			free(c->held[i]);
	}
	c->n_held = j;
}

#define BUCKET_HOSTS 256	/* distinct hosts counted per bucket, at most */

struct bucket {
	char *key;
	char *title;
	char *bad_access;
	unsigned long count, complete;
	char *first, *last;
	char *hosts[BUCKET_HOSTS];
	size_t n_hosts;
};

struct kfr_buckets {
	int frames;
	size_t n, cap;
	struct bucket *v;
	/* open addressing on the key: bucket number + 1, 0 for none; at
	 * least twice as many places as buckets (0 places: to be built)
	 */
	size_t *index;
	size_t index_size;
};

struct kfr_buckets *kfr_buckets_new(int frames)
{
	struct kfr_buckets *b = calloc(1, sizeof(*b));

	if (!b)
		exit(1);
	b->frames = frames;
	return b;
}

static char *sdup(const char *s)
{
	char *d = strdup(s ? s : "");

	if (!d)
		exit(1);
	return d;
}

static size_t key_hash(const char *s)
{
	size_t h = (size_t)14695981039346656037ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * (size_t)1099511628211ull;
	return h;
}

/* Where @key is in the index, or the empty place it would go. */
static size_t index_place(const struct kfr_buckets *b, const char *key)
{
	size_t mask = b->index_size - 1, i = key_hash(key) & mask;

	while (b->index[i] && strcmp(b->v[b->index[i] - 1].key, key))
		i = (i + 1) & mask;
	return i;
}

/* Twice the places (or built anew after kfr_buckets_print() sorted them). */
static void index_grow(struct kfr_buckets *b)
{
	size_t size = b->index_size ? 2 * b->index_size : 64;

	while (size < 2 * (b->n + 1))
		size *= 2;
	free(b->index);
	b->index = calloc(size, sizeof(*b->index));
	if (!b->index)
		exit(1);
	b->index_size = size;
	for (size_t k = 0; k < b->n; k++)
		b->index[index_place(b, b->v[k].key)] = k + 1;
}

/*
 * A fleet's week may hold thousands of buckets: finding a report's costs
 * the length of its key, not the number of buckets (which made --summary
 * quadratic in distinct titles).
 */
void kfr_buckets_add(struct kfr_buckets *b, const struct kfr_report *r, const char *seen)
{
	char key[8192];
	struct bucket *k = NULL;
	size_t place;

	kfr_bucket(r, b->frames, key, sizeof(key));
	if (2 * (b->n + 1) > b->index_size)
		index_grow(b);
	place = index_place(b, key);
	if (b->index[place])
		k = &b->v[b->index[place] - 1];
	if (!k) {
		if (b->n == b->cap) {
			b->cap = b->cap ? 2 * b->cap : 16;
			b->v = realloc(b->v, b->cap * sizeof(*b->v));
			if (!b->v)
				exit(1);
		}
		k = &b->v[b->n++];
		b->index[place] = b->n;
		memset(k, 0, sizeof(*k));
		k->key = sdup(key);
		k->title = sdup(r->title);
		k->bad_access = r->bad_access ? sdup(r->bad_access) : NULL;
		k->first = sdup(seen);
	}
	k->count++;
	k->complete += r->complete;
	if (r->host && k->n_hosts < BUCKET_HOSTS) {
		size_t i = 0;

		while (i < k->n_hosts && strcmp(k->hosts[i], r->host))
			i++;
		if (i == k->n_hosts)
			k->hosts[k->n_hosts++] = sdup(r->host);
	}
	free(k->last);
	k->last = sdup(seen);
}

static int by_count(const void *a, const void *b)
{
	const struct bucket *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return strcmp(x->key, y->key);
}

void kfr_buckets_print(FILE *f, struct kfr_buckets *b, bool json)
{
	/* qsort() wants a valid array even for no element (C11 7.22.5) */
	if (b->n)
		qsort(b->v, b->n, sizeof(*b->v), by_count);
	b->index_size = 0;	/* the numbers moved: rebuilt on the next add */
	if (!json)
		fprintf(f, "%6s %8s %5s  %-26s %-26s %s\n", "COUNT", "COMPLETE", "HOSTS",
			"FIRST SEEN", "LAST SEEN", "BUCKET");
	for (size_t i = 0; i < b->n; i++) {
		const struct bucket *k = &b->v[i];

		if (!json) {
			fprintf(f, "%6lu %8lu %5zu  %-26s %-26s %s\n", k->count, k->complete,
				k->n_hosts, k->first, k->last, k->key);
			continue;
		}
		fprintf(f, "{\"schema\":%d,\"bucket\":", KFR_SCHEMA);
		kfr_json_str(f, k->key);
		fputs(",\"title\":", f);
		kfr_json_str(f, k->title);
		fputs(",\"bad_access\":", f);
		kfr_json_str(f, k->bad_access);
		fprintf(f, ",\"count\":%lu,\"complete\":%lu,\"hosts\":%zu,\"first_seen\":",
			k->count, k->complete, k->n_hosts);
		kfr_json_str(f, k->first);
		fputs(",\"last_seen\":", f);
		kfr_json_str(f, k->last);
		fputs("}\n", f);
	}
}

void kfr_buckets_free(struct kfr_buckets *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->v[i].key);
		free(b->v[i].title);
		free(b->v[i].bad_access);
		free(b->v[i].first);
		free(b->v[i].last);
		for (size_t h = 0; h < b->v[i].n_hosts; h++)
			free(b->v[i].hosts[h]);
	}
	free(b->v);
	free(b->index);
	free(b);
}

/*
 * mm/kfence/core.c's stats file: "enabled: 1", then "name: value" per
 * counter. What a fleet wants to know from it: is sampling on, and has
 * the pool run full (allocations skipped for capacity)? Kernels before
 * 5.16 have no "skipped allocations" counters: there it is unknown.
 */
#define STATS_MAX 16

struct stats {
	char names[STATS_MAX][64];
	char keys[STATS_MAX][72];
	long long vals[STATS_MAX];
	size_t n;
	long long enabled, capacity;
};

/*
 * A counter's JSON key: "skipped allocations (capacity)" ->
 * skipped_allocations_capacity. Anything but ASCII letters and digits
 * becomes one '_' (a file that is not the kernel's may hold any byte: the
 * JSON stays ASCII), and a key met before gets "_2", "_3"... (no object
 * with one key twice).
 */
static void stats_key(struct stats *st, size_t i)
{
	char *key = st->keys[i];
	size_t k = 0, base;
	bool twice;

	for (const unsigned char *c = (const unsigned char *)st->names[i]; *c && k < 63; c++) {
		if (isalnum(*c) && *c < 0x80)
			key[k++] = (char)*c;
		else if (k && key[k - 1] != '_')
			key[k++] = '_';
	}
	while (k && key[k - 1] == '_')
		k--;
	if (!k)
		k = (size_t)snprintf(key, 64, "counter");
	key[k] = '\0';
	base = k;
	for (int dup = 2;; dup++) {
		twice = false;
		for (size_t j = 0; j < i && !twice; j++)
			twice = !strcmp(st->keys[j], key);
		if (!twice)
			break;
		snprintf(key + base, sizeof(st->keys[0]) - base, "_%d", dup);
	}
}

/* mm/kfence/core.c's "name: value" lines; 0, or 1 when there is none. */
static int stats_read(FILE *in, const char *name, struct stats *st)
{
	char line[256];

	st->n = 0;
	st->enabled = st->capacity = -1;
	while (fgets(line, sizeof(line), in) && st->n < STATS_MAX) {
		char *colon = strrchr(line, ':');
		size_t i = st->n;

		if (!colon || sscanf(colon + 1, "%lld", &st->vals[i]) != 1)
			continue;
		snprintf(st->names[i], sizeof(st->names[i]), "%.*s", (int)(colon - line), line);
		if (!strcmp(st->names[i], "enabled"))
			st->enabled = st->vals[i];
		if (!strcmp(st->names[i], "skipped allocations (capacity)"))
			st->capacity = st->vals[i];
		stats_key(st, i);
		st->n++;
	}
	if (!st->n) {
		if (name)
			fprintf(stderr, "kfence-report: '%s' holds no KFENCE statistics\n", name);
		return 1;
	}
	return 0;
}

static void stats_json(FILE *f, const struct stats *st, long long interval)
{
	fprintf(f, "{\"schema\":%d,\"stats\":{", KFR_SCHEMA);
	for (size_t i = 0; i < st->n; i++)
		fprintf(f, "%s\"%s\":%lld", i ? "," : "", st->keys[i], st->vals[i]);
	fputs("},\"sample_interval_ms\":", f);
	if (interval >= 0)
		fprintf(f, "%lld", interval);
	else
		fputs("null", f);
	fprintf(f, ",\"sampling\":%s,\"pool_was_full\":%s}\n",
		st->enabled > 0 && interval != 0 ? "true" : "false",
		st->capacity < 0 ? "null" : st->capacity > 0 ? "true" : "false");
}

static void stats_text(FILE *f, const struct stats *st, long long interval)
{
	for (size_t i = 0; i < st->n; i++)
		fprintf(f, "%-36s %lld\n", st->names[i], st->vals[i]);
	if (interval >= 0)
		fprintf(f, "%-36s %lld\n", "sample interval (ms)", interval);
	fprintf(f, "sampling: %s\n", st->enabled > 0 && interval != 0 ? "on" :
		st->enabled == 0 ? "off (KFENCE disabled itself, or sample_interval=0 at boot)" :
		"off (sample_interval=0)");
	fprintf(f, "pool: %s\n", st->capacity < 0 ?
		"unknown (no \"skipped allocations (capacity)\" counter: kernels "
		"before 5.16 do not count them)" : st->capacity > 0 ?
		"has run full (allocations were skipped for capacity: raise "
		"CONFIG_KFENCE_NUM_OBJECTS or look for a leak of KFENCE objects)" :
		"never full");
}

int kfr_stats_print(FILE *f, FILE *in, const char *name, long long interval, bool json)
{
	struct stats st;

	if (stats_read(in, name, &st))
		return 1;
	if (json)
		stats_json(f, &st, interval);
	else
		stats_text(f, &st, interval);
	return 0;
}

/*
 * mm/kfence/core.c's stats file: "enabled: 1", then "name: value" per
 * counter. What a fleet wants to know from it: is sampling on, and has
 * the pool run full (allocations skipped for capacity)? Kernels before
 * 5.16 have no "skipped allocations" counters: there it is unknown.
 */
int kfr_stats(FILE *f, const char *path, const char *interval_path, bool json)
{
	FILE *in = interval_path ? fopen(interval_path, "r") : NULL;
	long long interval = -1;
	int ret;

	if (in) {
		if (fscanf(in, "%lld", &interval) != 1)
			interval = -1;
		fclose(in);
	}
	in = fopen(path, "r");
	if (!in) {
		fprintf(stderr, "kfence-report: cannot read '%s': %s%s\n", path, strerror(errno),
			errno == ENOENT ? " (is debugfs mounted on /sys/kernel/debug, and the "
			"kernel built with CONFIG_KFENCE?)" : errno == EACCES ?
			" (debugfs is root-only)" : "");
		return 1;
	}
	ret = kfr_stats_print(f, in, path, interval, json);
	fclose(in);
	return ret;
}

/* Where the JSON string at @s (after its opening quote) ends. */
static const char *json_string_end(const char *s)
{
	for (; *s && *s != '"'; s++)
		if (*s == '\\' && !*++s)
			break;
	return s;
}

/*
 * A JSON string at @s (after its opening quote) into a new C string, a
 * field of at most KFR_MAX_FIELD bytes: each string costs its own length,
 * not the rest of the line's.
 */
static char *json_string_at(const char *s, const char **end)
{
	size_t n = 0;
	char *d = malloc((size_t)(json_string_end(s) - s) + 1), *f;
	unsigned int u;

	if (!d)
		exit(1);
	for (; *s && *s != '"'; s++) {
		if (*s != '\\') {
			d[n++] = *s;
			continue;
		}
		s++;
		if (*s == 'u' && sscanf(s + 1, "%4x", &u) == 1 && strspn(s + 1, "0123456789abcdefABCDEF") >= 4) {
			d[n++] = u && u < 0x100 ? (char)u : '?';
			s += 4;
		} else if (*s == 'n') {
			d[n++] = '\n';
		} else if (*s) {
			d[n++] = *s;
		} else {
			break;
		}
	}
	d[n] = '\0';
	if (end)
		*end = *s == '"' ? s + 1 : s;
	if (n <= KFR_MAX_FIELD)
		return d;
	f = kfr_field(d, n);
	free(d);
	return f;
}

/* The string value of top-level "key" in one of our records, or NULL. */
static char *json_field(const char *line, const char *key, const char *from)
{
	char pat[64];
	const char *k;

	snprintf(pat, sizeof(pat), ",\"%s\":\"", key);
	k = strstr(from ? from : line, pat);
	return k ? json_string_at(k + strlen(pat), NULL) : NULL;
}

/*
 * One of kfence-report's own JSON records (schema 2 or 3: their records
 * are alike), as a fleet gathers
 * them from its machines, back into the fields --summary needs: the title
 * forms, the stack, complete, and when and where it was seen. Our records
 * have a fixed key order, and the top-level "stack" comes before the
 * tracks' (which also have one).
 */
bool kfr_json_record(const char *line, struct kfr_report *r)
{
	static const char head[] = "{\"schema\":";
	const char *st, *e, *tail, *v = line + strlen(head);

	/* strchr() finds the NUL too: a line cut after the key is no record */
	if (strncmp(line, head, strlen(head)) || !*v || !strchr("23", *v) || v[1] != ',')
		return false;
	kfr_report_clear(r);
	r->kind = json_field(line, "kind", NULL);
	r->title = json_field(line, "title", NULL);
	r->bad_access = json_field(line, "bad_access", NULL);
	r->guilty = json_field(line, "guilty", NULL);
	st = strstr(line, ",\"stack\":[");
	if (st) {
		for (st += strlen(",\"stack\":["); *st == '"' && r->stack.n < KFR_MAX_FRAMES; ) {
			r->stack.frames[r->stack.n++] = json_string_at(st + 1, &e);
			st = *e == ',' ? e + 1 : e;
		}
	}
	tail = strstr(line, ",\"boot_id\":");
	r->host = json_field(line, "host", tail && tail - line > 200 ? tail - 200 : NULL);
	r->wallclock = tail ? json_field(tail, "wallclock", NULL) : NULL;
	if (tail && (e = strstr(tail, ",\"time\":")) && e[8] != 'n')
		r->time = kfr_field(e + 8, strspn(e + 8, "0123456789."));
	r->complete = strstr(line, ",\"complete\":true") != NULL;
	return r->title != NULL;
}
