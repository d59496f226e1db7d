// SPDX-License-Identifier: LGPL-2.1-or-later
#include <stdlib.h>
#include <string.h>

#include "snap.h"

static size_t hash(const char *s)
{
	size_t h = 5381;

	while (*s)
		h = h * 33 ^ (unsigned char)*s++;
	return h;
}

struct fw_snap *fw_snap_new(void)
{
	struct fw_snap *s = calloc(1, sizeof(*s));

	if (s && !(s->b = calloc(s->nb = 16, sizeof(*s->b)))) {
		free(s);
		s = NULL;
	}
	return s;
}

void fw_snap_free(struct fw_snap *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->nb; i++) {
		struct fw_snap_ent *e = s->b[i], *n;

		for (; e; e = n) {
			n = e->next;
			free(e);
		}
	}
	free(s->b);
	free(s);
}

static struct fw_snap_ent **find(struct fw_snap *s, const char *name)
{
	struct fw_snap_ent **pp = &s->b[hash(name) & (s->nb - 1)];

	for (; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->name, name))
			break;
	return pp;
}

static void grow(struct fw_snap *s)
{
	size_t nb = s->nb * 2, i;
	struct fw_snap_ent **b = calloc(nb, sizeof(*b));

	if (!b)
		return;		/* keep the longer chains */
	for (i = 0; i < s->nb; i++) {
		struct fw_snap_ent *e = s->b[i], *n;

		for (; e; e = n) {
			size_t k = hash(e->name) & (nb - 1);

			n = e->next;
			e->next = b[k];
			b[k] = e;
		}
	}
	free(s->b);
	s->b = b;
	s->nb = nb;
}

static void fill(struct fw_snap_ent *e, const struct stat *st)
{
	e->ino = st->st_ino;
	e->mtime_ns = st->st_mtim.tv_sec * 1000000000ll + st->st_mtim.tv_nsec;
	e->size = st->st_size;
	e->isdir = S_ISDIR(st->st_mode);
}

static struct fw_snap_ent *get(struct fw_snap *s, const char *name)
{
	struct fw_snap_ent **pp = find(s, name), *e = *pp;

	if (e)
		return e;
	e = calloc(1, sizeof(*e) + strlen(name) + 1);
	if (!e)
		return NULL;
	strcpy(e->name, name);
	*pp = e;
	if (++s->n > s->nb)
		grow(s);
	return e;
}

void fw_snap_set(struct fw_snap *s, const char *name, const struct stat *st)
{
	struct fw_snap_ent **pp, *e;

	if (st) {
		if ((e = get(s, name)))
			fill(e, st);
		return;
	}
	pp = find(s, name);
	if ((e = *pp)) {
		*pp = e->next;
		free(e);
		s->n--;
	}
}

void fw_snap_set_unknown(struct fw_snap *s, const char *name, bool isdir)
{
	struct fw_snap_ent *e = get(s, name);

	if (e) {
		e->ino = 0;	/* no inode is 0: "unknown" */
		e->isdir = isdir;
	}
}

enum fw_snap_change fw_snap_check(struct fw_snap *s, const char *name,
				  const struct stat *st)
{
	struct fw_snap_ent *e = *find(s, name);
	enum fw_snap_change c = FW_SNAP_SAME;

	if (!e) {
		fw_snap_set(s, name, st);
		e = *find(s, name);
		c = FW_SNAP_NEW;
	} else if (!e->ino) {
		c = FW_SNAP_MODIFIED;	/* reported present, gone by then: changed since */
	} else if (e->ino != (uint64_t)st->st_ino) {
		c = FW_SNAP_REPLACED;
	} else if (!S_ISDIR(st->st_mode) &&
		   (e->mtime_ns != st->st_mtim.tv_sec * 1000000000ll + st->st_mtim.tv_nsec ||
		    e->size != st->st_size)) {
		/* A directory's mtime moves with its entries: those get reported. */
		c = FW_SNAP_MODIFIED;
	}
	if (e) {
		fill(e, st);
		e->seen = true;
	}
	return c;
}

void fw_snap_sweep(struct fw_snap *s,
		   void (*fn)(const struct fw_snap_ent *e, void *arg), void *arg)
{
	size_t i;

	for (i = 0; i < s->nb; i++) {
		struct fw_snap_ent **pp = &s->b[i];

		while (*pp) {
			struct fw_snap_ent *e = *pp;

			if (e->seen) {
				e->seen = false;
				pp = &e->next;
				continue;
			}
			fn(e, arg);
			*pp = e->next;
			free(e);
			s->n--;
		}
	}
}
