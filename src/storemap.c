// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A recorded map moves as the files it made do: each extent's host
 * range goes through f piece by piece (the old range to the new one,
 * other host ids as they are), and an extent that f splits becomes one
 * extent per piece.  Only the numbers that change are rewritten, so a
 * record keeps its form; no two container ids may come to share a host
 * id.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocijson.h"
#include "storemap.h"

enum style { STORAGE, OCI };

static const char *const field[2][3] = {
	[STORAGE] = { "container_id", "host_id", "size" },
	[OCI] = { "containerID", "hostID", "size" },
};

#define PIECES_MAX	1024	/* pieces of one recorded map */

struct piece {
	uint64_t c, h, s;	/* container id, host id, count */
};

struct pieces {
	struct piece p[PIECES_MAX];
	size_t nr;
};

static const struct si_extent *covering(const struct si_idmap *f, uint64_t id)
{
	unsigned int i;

	for (i = 0; i < f->nr; i++)
		if (id >= f->ext[i].first && id - f->ext[i].first < f->ext[i].count)
			return &f->ext[i];
	return NULL;
}

/* Appends the pieces of extent (c, h, s) through f; returns how many, or -1. */
static int through(const struct si_idmap *f, uint64_t c, uint64_t h, uint64_t s,
		   struct pieces *all, char *why, size_t size)
{
	size_t first = all->nr, i;
	uint64_t at = h;

	while (at < h + s) {
		const struct si_extent *e = covering(f, at);
		uint64_t len, t;
		struct piece *last = all->nr > first ? &all->p[all->nr - 1] : NULL;

		if (!e) {
			snprintf(why, size, "host id %" PRIu64 " of the map %" PRIu64 ":%" PRIu64 ":%" PRIu64 " is in the old range but not mapped to the new one",
				 at, c, h, s);
			return -1;
		}
		len = (uint64_t)e->first + e->count - at;
		if (len > h + s - at)
			len = h + s - at;
		t = e->target + (at - e->first);
		if (last && last->h + last->s == t && last->c + last->s == c + (at - h)) {
			last->s += len;
		} else if (all->nr == PIECES_MAX) {
			snprintf(why, size, "a map of more than %d ranges", PIECES_MAX);
			return -1;
		} else {
			all->p[all->nr++] = (struct piece){ c + (at - h), t, len };
		}
		at += len;
	}
	for (i = first; i < all->nr; i++) {
		size_t j;

		for (j = 0; j < i; j++)
			if (all->p[i].h < all->p[j].h + all->p[j].s &&
			    all->p[j].h < all->p[i].h + all->p[i].s) {
				snprintf(why, size, "the new map would give host id %" PRIu64 " to two container ids",
					 all->p[i].h > all->p[j].h ? all->p[i].h : all->p[j].h);
				return -1;
			}
	}
	return (int)(all->nr - first);
}

static int number(struct si_json_edits *l, struct si_json_span v, uint64_t x)
{
	char text[24];

	snprintf(text, sizeof(text), "%" PRIu64, x);
	return si_json_edit_add(l, v.off, v.len, text);
}

/* An extent split in pieces: one object per piece, in the record's own keys. */
static int pieces_text(struct si_json_edits *l, struct si_json_span el,
		       const struct piece *p, size_t n, enum style st)
{
	size_t cap = n * 96 + 1, used = 0, i;
	char *text = malloc(cap);
	int err;

	if (!text)
		return -1;
	for (i = 0; i < n; i++)
		used += (size_t)snprintf(text + used, cap - used,
					 "%s{\"%s\":%" PRIu64 ",\"%s\":%" PRIu64 ",\"%s\":%" PRIu64 "}",
					 i ? "," : "", field[st][0], p[i].c, field[st][1],
					 p[i].h, field[st][2], p[i].s);
	err = si_json_edit_add(l, el.off, el.len, text);
	free(text);
	return err;
}

/* One recorded map (an array of extents) through f: its number of extents, or -1. */
static int remap_array(const char *b, struct si_json_span arr, enum style st,
		       const struct si_idmap *f, struct si_json_edits *l,
		       bool *changed, char *why, size_t size)
{
	struct pieces all;
	struct si_json_span el;
	size_t iter = 0;
	int r, entries = 0;

	all.nr = 0;
	while ((r = si_json_elem(b, arr, &iter, &el)) == 1) {
		struct si_json_span v[3];
		uint64_t x[3];
		size_t at = all.nr;
		int k, n;

		entries++;
		for (k = 0; k < 3; k++)
			if (si_json_member(b, el, field[st][k], &v[k], NULL) != 1 ||
			    si_json_u64(b, v[k], &x[k]) < 0 || x[k] > SI_ID_MAX + 1ull) {
				snprintf(why, size, "a map entry without a valid \"%s\"", field[st][k]);
				return -1;
			}
		if (!x[2] || x[0] + x[2] > SI_ID_MAX + 1ull || x[1] + x[2] > SI_ID_MAX + 1ull) {
			snprintf(why, size, "a map entry %" PRIu64 ":%" PRIu64 ":%" PRIu64 " that is empty or goes past the largest id",
				 x[0], x[1], x[2]);
			return -1;
		}
		n = through(f, x[0], x[1], x[2], &all, why, size);
		if (n < 0)
			return -1;
		if (n == 1 && all.p[at].h == x[1])
			continue;
		*changed = true;
		if ((n == 1 ? number(l, v[1], all.p[at].h) :
		     pieces_text(l, el, all.p + at, (size_t)n, st)) < 0) {
			snprintf(why, size, "out of memory");
			return -1;
		}
	}
	if (r < 0)
		snprintf(why, size, "a map that is not a JSON array of objects");
	return r < 0 ? -1 : entries;
}

/* Member key of obj, if it is of type (a '[' or '{'): 1, 0 if absent or null. */
static int member_of(const char *b, struct si_json_span obj, const char *key,
		     char type, struct si_json_span *v)
{
	int r = si_json_member(b, obj, key, v, NULL);

	if (r <= 0)
		return r;
	if (si_json_is(b, *v, 'n'))
		return 0;
	return si_json_is(b, *v, type) ? 1 : -1;
}

/* The two maps named keys[0] (uids) and keys[1] (gids) of obj, if there. */
static int remap_pair(const char *b, struct si_json_span obj, const char *const keys[2],
		      enum style st, const struct si_idmap f[2], struct si_json_edits *l,
		      bool *changed, bool *mapped, char *why, size_t size)
{
	int k;

	for (k = 0; k < 2; k++) {
		struct si_json_span arr;
		int r = member_of(b, obj, keys[k], '[', &arr);

		if (r < 0) {
			snprintf(why, size, "\"%s\" is not an array", keys[k]);
			return -1;
		}
		if (r)
			r = remap_array(b, arr, st, &f[k], l, changed, why, size);
		if (r < 0)
			return -1;
		if (mapped && r > 0)
			*mapped = true;
	}
	return 0;
}

static int add_id(struct si_store_ids *ids, const char *id, const char *layer,
		  bool mapped)
{
	struct si_store_rec *p = realloc(ids->rec, (ids->nr + 1) * sizeof(*p));

	if (!p)
		return -1;
	ids->rec = p;
	p += ids->nr++;
	snprintf(p->id, sizeof(p->id), "%s", id);
	snprintf(p->layer, sizeof(p->layer), "%s", layer);
	p->mapped = mapped;
	return 0;
}

static int splice_out(const char *b, size_t n, struct si_json_edits *l, bool changed,
		      char **out, size_t *outlen, char *why, size_t size)
{
	*out = NULL;
	*outlen = 0;
	if (changed && si_json_splice(b, n, l, out, outlen) < 0) {
		snprintf(why, size, "out of memory");
		return -1;
	}
	return 0;
}

int si_storemap_records(const char *b, size_t n, const struct si_idmap f[2],
			char **out, size_t *outlen, struct si_store_ids *ids,
			char *why, size_t size)
{
	static const char *const keys[2] = { "uidmap", "gidmap" };
	struct si_json_edits l = { 0 };
	struct si_json_span doc, rec, v;
	bool changed = false;
	size_t iter = 0;
	int r, err = -1;

	memset(ids, 0, sizeof(*ids));
	if (si_json_doc(b, n, &doc) < 0 || !si_json_is(b, doc, '[')) {
		snprintf(why, size, "not a JSON array of records");
		return -1;
	}
	while ((r = si_json_elem(b, doc, &iter, &rec)) == 1) {
		char id[SI_STORE_ID_MAX], layer[SI_STORE_ID_MAX] = "", sub[200];
		bool mapped = false;

		if (!si_json_is(b, rec, '{') || si_json_member(b, rec, "id", &v, NULL) != 1 ||
		    si_json_str(b, v, id, sizeof(id)) < 0) {
			snprintf(why, size, "a record without an \"id\"");
			goto out_free;
		}
		if (si_json_member(b, rec, "layer", &v, NULL) == 1 &&
		    si_json_str(b, v, layer, sizeof(layer)) < 0) {
			snprintf(why, size, "%s: a \"layer\" that is not a plain string", id);
			goto out_free;
		}
		if (remap_pair(b, rec, keys, STORAGE, f, &l, &changed, &mapped,
			       sub, sizeof(sub)) < 0) {
			snprintf(why, size, "%s: %s", id, sub);
			goto out_free;
		}
		if (add_id(ids, id, layer, mapped) < 0) {
			snprintf(why, size, "out of memory");
			goto out_free;
		}
	}
	if (r < 0)
		snprintf(why, size, "not a JSON array of records");
	else
		err = splice_out(b, n, &l, changed, out, outlen, why, size);
out_free:
	si_json_edits_free(&l);
	if (err)
		si_store_ids_free(ids);
	return err;
}

void si_store_ids_free(struct si_store_ids *ids)
{
	free(ids->rec);
	memset(ids, 0, sizeof(*ids));
}

/* A container's config: its storage options' maps and its spec's. */
static int remap_config(const char *b, size_t n, const struct si_idmap f[2],
			char **out, size_t *outlen, char *why, size_t size)
{
	static const char *const opts[2] = { "UIDMap", "GIDMap" };
	static const char *const spec[2] = { "uidMappings", "gidMappings" };
	struct si_json_edits l = { 0 };
	struct si_json_span doc, v, linux_;
	bool changed = false;
	int err = -1, r;

	if (si_json_doc(b, n, &doc) < 0 || !si_json_is(b, doc, '{')) {
		snprintf(why, size, "not a JSON object");
		return -1;
	}
	r = member_of(b, doc, "idMappingsOptions", '{', &v);
	if (r < 0 || (r && remap_pair(b, v, opts, STORAGE, f, &l, &changed, NULL, why, size) < 0))
		goto out_free;
	r = member_of(b, doc, "spec", '{', &v);
	if (r > 0)
		r = member_of(b, v, "linux", '{', &linux_);
	if (r < 0 || (r && remap_pair(b, linux_, spec, OCI, f, &l, &changed, NULL, why, size) < 0))
		goto out_free;
	err = splice_out(b, n, &l, changed, out, outlen, why, size);
out_free:
	if (err && r < 0)
		snprintf(why, size, "\"idMappingsOptions\", \"spec\" or its \"linux\" is not an object");
	si_json_edits_free(&l);
	return err;
}

static struct si_bolt_item *find(struct si_bolt_bucket *bk, const char *key)
{
	size_t i, n = strlen(key);

	for (i = 0; bk && i < bk->nr; i++)
		if (bk->items[i].klen == n && !memcmp(bk->items[i].key, key, n))
			return &bk->items[i];
	return NULL;
}

int si_storemap_libpod(struct si_bolt *db, const struct si_idmap f[2],
		       unsigned int *changed, char *why, size_t size)
{
	struct si_bolt_item *ctrs = find(&db->root, "ctr");
	size_t i;

	*changed = 0;
	for (i = 0; ctrs && ctrs->sub && i < ctrs->sub->nr; i++) {
		struct si_bolt_item *c = &ctrs->sub->items[i];
		struct si_bolt_item *cfg = find(c->sub, "config");
		char sub[200], *out = NULL;
		size_t len;
		bool did;
		int err;

		if (!cfg || cfg->sub)
			continue;
		err = remap_config((const char *)cfg->val, cfg->vlen, f, &out, &len,
				   sub, sizeof(sub));
		if (!err && out && si_bolt_set(cfg, out, len) < 0)
			err = -1, snprintf(sub, sizeof(sub), "out of memory");
		did = out != NULL;
		free(out);
		if (err) {
			snprintf(why, size, "container %.*s: %s", (int)(c->klen > 64 ? 64 : c->klen),
				 (const char *)c->key, sub);
			return -1;
		}
		if (did)
			++*changed;
	}
	return 0;
}

void si_libpod_runroot(struct si_bolt *db, char *out, size_t size)
{
	struct si_bolt_item *cfg = find(&db->root, "runtime-config");
	struct si_bolt_item *rr = cfg ? find(cfg->sub, "run-root") : NULL;

	out[0] = '\0';
	if (rr && !rr->sub && rr->vlen < size && !memchr(rr->val, '\0', rr->vlen)) {
		memcpy(out, rr->val, rr->vlen);
		out[rr->vlen] = '\0';
	}
}
