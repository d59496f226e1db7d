// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The corpus test, after syzkaller's pkg/report: each file in
 * tests/corpus/ is one real-world case, with its expected parse:
 *
 *   # comment lines: kernel, format, where the case comes from
 *   # group: NAME      (optional) every file of a group must give the same
 *                      titles and buckets: one bug, several kernels/formats
 *   === expected
 *   reports: N
 *   --- report 1
 *   title: ...          (kfr_print_expect() lines, then "bucket: ...")
 *   === input
 *   the log, to the end of the file or the next "=== input" (the next
 *   input file of one stream, as kfence-report reads its FILE arguments:
 *   rotated logs, in order)
 *
 * "# syzkaller-title: T" lines (one per report, in order; "-" for a report
 * syzkaller would not title) give the title syzkaller's pkg/report gives:
 * the agreement per bug type is printed at the end (README.md's table). Each
 * FAMILY and FORM of src/title-rules.def names the case that backs it: the
 * case must use that family to skip a frame, or get that form.
 *
 * Adding a case is adding a file; "corpus-test --update FILE" writes the
 * expected section from the parser's output, to be read and checked by eye
 * before it is committed. Prints TAP; fails on any difference.
 */
#include "report.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUCKET_FRAMES 3

#define MAX_REPORTS 64

struct out {
	FILE *f;
	unsigned long n;
	char *titles;		/* "title\nbucket\n" per report, for groups */
	size_t titles_len;
	unsigned families;	/* title rules used, over all its reports */
	unsigned long long forms;
	char *type[MAX_REPORTS];	/* "kasan use-after-free" */
	char *title[MAX_REPORTS];
};

static void on_report(const struct kfr_report *r, void *arg)
{
	struct out *o = arg;
	char bucket[1024];

	o->families |= r->title_families;
	if (r->title_form >= 0 && r->title_form < 64)
		o->forms |= 1ull << r->title_form;
	if (o->n < MAX_REPORTS) {
		if (asprintf(&o->type[o->n], "%s %s", r->detector ? r->detector : "kfence",
			     r->kind ? r->kind : "unknown") < 0)
			exit(1);
		o->title[o->n] = strdup(r->title ? r->title : "-");
	}

	kfr_bucket(r, BUCKET_FRAMES, bucket, sizeof(bucket));
	fprintf(o->f, "--- report %lu\n", ++o->n);
	kfr_print_expect(o->f, r);
	fprintf(o->f, "bucket: %s\n", bucket);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static const char input_mark[] = "=== input\n";
static const char expect_mark[] = "=== expected\n";

/* Parse every input section of @text (from @in on); output goes to @o. */
static void parse_inputs(char *in, const char *end, struct out *o)
{
	struct kfr_parser p;
	char *body, *next, *line, *nl;
	char *records = NULL;
	size_t records_len = 0;
	FILE *save = o->f;

	o->f = open_memstream(&records, &records_len);
	kfr_parser_init(&p, on_report, o);
	for (; in && in < end; in = next) {
		const char *send;

		body = in + strlen(input_mark);
		next = strstr(body - 1, "\n=== input\n");
		if (next)
			next++;
		send = next ? next : end;
		for (line = body; line < send; line = nl + 1) {
			char saved;

			nl = memchr(line, '\n', (size_t)(send - line));
			if (!nl)
				nl = (char *)send;
			saved = *nl;
			*nl = '\0';
			kfr_parser_line(&p, line);
			*nl = saved;
		}
		kfr_parser_next_input(&p);
	}
	kfr_parser_finish(&p);
	kfr_parser_free(&p);
	fclose(o->f);
	o->f = save;
	fprintf(o->f, "reports: %lu\n", o->n);
	fwrite(records, 1, records_len, o->f);
	free(records);
}

/* The "title:", "bad_access:" and "bucket:" lines of an expected section,
 * for groups; only the "bad_access:" lines for bad-access groups.
 */
static char *titles_of(const char *exp, bool bad_access_only)
{
	size_t cap = strlen(exp) + 1, len = 0;
	char *t = calloc(1, cap);
	const char *l;

	for (l = exp; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		size_t n = strcspn(l, "\n");

		if ((!bad_access_only && (!strncmp(l, "title: ", 7) || !strncmp(l, "bucket: ", 8))) ||
		    !strncmp(l, "bad_access: ", 12)) {
			memcpy(t + len, l, n);
			len += n;
			t[len++] = '\n';
		}
	}
	return t;
}

struct group {
	char name[64];
	char *titles;
	char file[256];
};

static struct group groups[256];
static size_t n_groups;

/* The rules each file used, for the title-rules.def checks. */
struct used {
	char name[128];
	unsigned families;
	unsigned long long forms;
};

static struct used used[512];
static size_t n_used;

/* Agreement with syzkaller's titles, per bug type. */
struct agreement {
	char type[64];
	int agree, total;
	char missed[1400];
};

static struct agreement agreements[64];
static size_t n_agreements;

static void agree(const char *type, const char *ours, const char *theirs, const char *path)
{
	struct agreement *a = NULL;

	for (size_t i = 0; i < n_agreements && !a; i++)
		if (!strcmp(agreements[i].type, type))
			a = &agreements[i];
	if (!a && n_agreements < 64) {
		a = &agreements[n_agreements++];
		snprintf(a->type, sizeof(a->type), "%s", type);
	}
	if (!a)
		return;
	a->total++;
	if (!strcmp(ours, theirs))
		a->agree++;
	else if (!a->missed[0])
		snprintf(a->missed, sizeof(a->missed), "%s: ours \"%s\", syzkaller's \"%s\"",
			 path, ours, theirs);
}

/* "# syzkaller-title: T" lines against the titles made */
static void syzkaller_titles(const char *text, const char *in, struct out *o, const char *path)
{
	const char *g = text;
	unsigned long i = 0;

	while ((g = strstr(g, "# syzkaller-title: ")) && g < in && i < o->n && i < MAX_REPORTS) {
		char want[512];

		g += 19;
		snprintf(want, sizeof(want), "%.*s", (int)strcspn(g, "\n"), g);
		agree(o->type[i], o->title[i], want, path);
		i++;
	}
}

static int kasan_checks;
static char kasan_msg[64][700];
static bool kasan_ok[64];

static int check_file(const char *path, bool update, int n)
{
	size_t len;
	char *text = slurp(path, &len), *in, *exp, *got = NULL, *g;
	size_t got_len = 0;
	struct out o = { 0 };
	int ok;

	if (!text) {
		printf("not ok %d - %s: cannot read\n", n, path);
		return 1;
	}
	in = !strncmp(text, input_mark, strlen(input_mark)) ? text : strstr(text, "\n=== input\n");
	if (in && in != text)
		in++;
	exp = strstr(text, expect_mark);
	if (!in || (!update && (!exp || exp > in))) {
		printf("not ok %d - %s: no '=== expected' before '=== input'\n", n, path);
		free(text);
		return 1;
	}
	o.f = open_memstream(&got, &got_len);
	parse_inputs(in, text + len, &o);
	fclose(o.f);
	syzkaller_titles(text, in, &o, path);
	if (n_used < sizeof(used) / sizeof(used[0])) {
		const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;

		snprintf(used[n_used].name, sizeof(used[0].name), "%s", base);
		used[n_used].families = o.families;
		used[n_used++].forms = o.forms;
	}
	for (unsigned long i = 0; i < o.n && i < MAX_REPORTS; i++) {
		free(o.type[i]);
		free(o.title[i]);
	}
	if (update) {
		FILE *f = fopen(path, "wb");
		size_t head = exp && exp < in ? (size_t)(exp - text) : (size_t)(in - text);

		fwrite(text, 1, head, f);
		fputs(expect_mark, f);
		fputs(got, f);
		fwrite(in, 1, len - (size_t)(in - text), f);
		fclose(f);
		printf("ok %d - %s: updated\n", n, path);
		ok = 1;
	} else {
		exp += strlen(expect_mark);
		ok = (size_t)(in - exp) == got_len && !memcmp(exp, got, got_len);
		if (ok) {
			printf("ok %d - %s\n", n, path);
		} else {
			FILE *d = fopen("/tmp/kfr-corpus-got.txt", "w");

			printf("not ok %d - %s: parse differs from the expected section\n", n, path);
			printf("# got (also in /tmp/kfr-corpus-got.txt):\n");
			for (char *l = got; *l; ) {
				size_t ln = strcspn(l, "\n");

				printf("#   %.*s\n", (int)ln, l);
				l += ln + (l[ln] == '\n');
			}
			if (d) {
				fputs(got, d);
				fclose(d);
			}
		}
	}
	/* "# kasan-title: T": KASAN's title of the same bug buckets with it */
	g = strstr(text, "# kasan-title: ");
	if (g && g < in && ok && !update) {
		char kt[512], want[600], *ba = strstr(got, "\nbad_access: ");
		bool same;

		snprintf(kt, sizeof(kt), "%.*s", (int)strcspn(g + 15, "\n"), g + 15);
		same = ba && kfr_kasan_bad_access(kt, want, sizeof(want) - 2) &&
		       !strncmp(ba + 13, want, strlen(want)) && ba[13 + strlen(want)] == '\n';
		if (kasan_checks < 64) {
			snprintf(kasan_msg[kasan_checks], sizeof(kasan_msg[0]),
				 "%s: \"%s\" buckets with it as \"%s\"", path, kt,
				 same ? want : "(different)");
			kasan_ok[kasan_checks++] = same;
		}
	}
	/* group membership: "# group: NAME" (titles and buckets) or
	 * "# bad-access-group: NAME" (the KASAN-comparable form only)
	 */
	for (int ba = 0; ba < 2; ba++) {
		const char *key = ba ? "# bad-access-group: " : "# group: ";

		g = strstr(text, key);
		if (!g || g > in || !ok || n_groups >= sizeof(groups) / sizeof(groups[0]))
			continue;
		g += strlen(key);
		{
			struct group *gr = &groups[n_groups++];

			snprintf(gr->name, sizeof(gr->name), "%s%.*s", ba ? "bad-access " : "",
				 (int)strcspn(g, "\n"), g);
			gr->titles = titles_of(got, ba);
			snprintf(gr->file, sizeof(gr->file), "%s", path);
		}
	}
	free(got);
	free(text);
	return !ok;
}

static const struct used *used_by(const char *name)
{
	for (size_t i = 0; i < n_used; i++)
		if (!strcmp(used[i].name, name))
			return &used[i];
	return NULL;
}

/* Each family and form of title-rules.def is used by the case it names. */
static int check_rules(int *n)
{
	const struct kfr_title_family *fam;
	const struct kfr_title_form *form;
	size_t nfam, nform;
	int failed = 0;

	fam = kfr_title_families(&nfam);
	for (size_t i = 0; i < nfam; i++) {
		const struct used *u = used_by(fam[i].corpus);
		bool ok = u && (u->families & (1u << i));

		printf("%sok %d - title rule family %s (%s) is used by %s%s\n", ok ? "" : "not ",
		       ++*n, fam[i].name, fam[i].what, fam[i].corpus,
		       u ? "" : " (no such corpus case)");
		failed |= !ok;
	}
	form = kfr_title_forms(&nform);
	for (size_t i = 0; i < nform; i++) {
		const struct used *u = used_by(form[i].corpus);
		bool ok = u && (u->forms & (1ull << i));

		printf("%sok %d - title form \"%s\" (%s %s) is used by %s%s\n", ok ? "" : "not ",
		       ++*n, form[i].title, form[i].detector, form[i].bug_type, form[i].corpus,
		       u ? "" : " (no such corpus case)");
		failed |= !ok;
	}
	for (size_t i = 0; i < n_agreements; i++) {
		printf("# syzkaller agreement, %s: %d of %d\n", agreements[i].type,
		       agreements[i].agree, agreements[i].total);
		if (agreements[i].missed[0])
			printf("#   first miss: %s\n", agreements[i].missed);
	}
	return failed;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Files of a directory, sorted, or the argument itself. */
static size_t list_files(const char *arg, char ***out)
{
	DIR *d = opendir(arg);
	struct dirent *e;
	size_t n = 0, cap = 16;
	char **v = malloc(cap * sizeof(*v));

	if (!d) {
		v[n++] = strdup(arg);
		*out = v;
		return n;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap)
			v = realloc(v, (cap *= 2) * sizeof(*v));
		if (asprintf(&v[n], "%s/%s", arg, e->d_name) < 0)
			exit(1);
		n++;
	}
	closedir(d);
	qsort(v, n, sizeof(*v), cmp_str);
	*out = v;
	return n;
}

int main(int argc, char **argv)
{
	bool update = argc > 1 && !strcmp(argv[1], "--update");
	char **files[64];
	size_t nf[64], total = 0;
	int n = 0, failed = 0, nargs = 0;

	for (int i = 1 + update; i < argc && nargs < 64; i++, nargs++) {
		nf[nargs] = list_files(argv[i], &files[nargs]);
		total += nf[nargs];
	}
	/* the groups' checks: one per group beyond its first member */
	printf("# corpus: %zu files\n", total);
	for (int a = 0; a < nargs; a++)
		for (size_t i = 0; i < nf[a]; i++) {
			failed |= check_file(files[a][i], update, ++n);
			free(files[a][i]);
		}
	for (int a = 0; a < nargs; a++)
		free(files[a]);
	for (int i = 0; i < kasan_checks; i++) {
		printf("%sok %d - %s\n", kasan_ok[i] ? "" : "not ", ++n, kasan_msg[i]);
		failed |= !kasan_ok[i];
	}
	for (size_t i = 0; i < n_groups; i++) {
		for (size_t j = 0; j < i; j++) {
			if (strcmp(groups[i].name, groups[j].name))
				continue;
			n++;
			if (!strcmp(groups[i].titles, groups[j].titles)) {
				printf("ok %d - group %s: %s titles and buckets as %s\n", n,
				       groups[i].name, groups[i].file, groups[j].file);
			} else {
				printf("not ok %d - group %s: %s and %s differ in title or bucket\n",
				       n, groups[i].name, groups[i].file, groups[j].file);
				failed = 1;
			}
			break;
		}
	}
	for (size_t i = 0; i < n_groups; i++)
		free(groups[i].titles);
	/* the rule checks need the whole corpus */
	if (!update && nargs == 1 && nf[0] > 1)
		failed |= check_rules(&n);
	if (!total) {
		printf("not ok 1 - no corpus files given\n");
		n = 1;
		failed = 1;
	}
	printf("1..%d\n", n);
	return failed;
}
