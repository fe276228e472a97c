// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * bolt's file, as bbolt (go.etcd.io/bbolt, file format version 2)
 * writes it: fixed-size pages, each with a 16-byte header (page id,
 * flags, element count, overflow pages).  Pages 0 and 1 are meta pages,
 * one per transaction parity, each with an FNV-1a checksum; the newer
 * valid one names the root bucket's page and the freelist page.
 *
 * A bucket is a B+tree: branch pages of (key, child page) and leaf
 * pages of (flags, key, value).  A leaf element flagged as a bucket
 * holds a 16-byte bucket header (root page, sequence); a root of 0
 * means the bucket is inline: its one leaf page follows the header
 * inside the value.  Elements point to their data with an offset from
 * the element itself.
 *
 * Reading checks every offset against the page (and overflow pages) it
 * is in and every page against the file, and refuses a page reached
 * twice, so that a damaged file is an error, not a loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bolt.h"
#include "le.h"

#define MAGIC		0xED0CDAEDu
#define FORMAT_VERSION		2
#define HDR		16	/* page header */
#define ELEM		16	/* a leaf or branch element */
#define F_BRANCH	0x01
#define F_LEAF		0x02
#define F_META		0x04
#define F_FREELIST	0x10
#define BUCKET_FLAG	0x01	/* a leaf element holding a bucket */
#define BUCKET_HDR	16
#define META_SUMMED	56	/* meta bytes under the checksum */
#define MAX_DEPTH	64
#define FREELIST_PAGE	2

/* ---- reading ---- */

struct reader {
	const unsigned char *b;
	uint32_t ps;
	uint64_t pages;		/* pages that may be referenced */
	unsigned char *seen;	/* a bit per page */
	char *why;
	size_t size;
};

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--) {
		h ^= *p++;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The meta page at off, if valid: its page size and body. */
static const unsigned char *meta_at(const unsigned char *b, size_t n, size_t off)
{
	const unsigned char *m = b + off + HDR;
	uint32_t ps;

	if (off > n || n - off < HDR + META_SUMMED + 8)
		return NULL;
	ps = get32(m + 8);
	if (get32(m) != MAGIC || get32(m + 4) != FORMAT_VERSION ||
	    fnv1a(m, META_SUMMED) != get64(m + META_SUMMED) ||
	    ps < 512 || ps > 65536 || (ps & (ps - 1)))
		return NULL;
	return m;
}

static int fail(struct reader *r, const char *what, uint64_t pgid)
{
	snprintf(r->why, r->size, "page %llu: %s", (unsigned long long)pgid, what);
	return -1;
}

static int add_item(struct si_bolt_bucket *bk, const struct si_bolt_item *it)
{
	if (bk->nr == bk->cap) {
		size_t cap = bk->cap ? 2 * bk->cap : 8;
		struct si_bolt_item *p = realloc(bk->items, cap * sizeof(*p));

		if (!p)
			return -1;
		bk->items = p;
		bk->cap = cap;
	}
	bk->items[bk->nr++] = *it;
	return 0;
}

static int read_page(struct reader *r, uint64_t pgid, struct si_bolt_bucket *bk,
		     unsigned int depth);

/* The leaf elements of page p (span bytes, pgid for messages) into bk. */
static int read_leaf(struct reader *r, const unsigned char *p, uint64_t span,
		     uint64_t pgid, struct si_bolt_bucket *bk, unsigned int depth)
{
	unsigned int count = get16(p + 10), i;

	if (HDR + (uint64_t)count * ELEM > span)
		return fail(r, "more elements than the page holds", pgid);
	for (i = 0; i < count; i++) {
		const unsigned char *e = p + HDR + (size_t)i * ELEM;
		uint64_t off = HDR + (uint64_t)i * ELEM + get32(e + 4);
		struct si_bolt_item it = { .klen = get32(e + 8), .vlen = get32(e + 12) };

		if (off + it.klen + it.vlen > span)
			return fail(r, "an element's data lies outside its page", pgid);
		it.key = p + off;
		it.val = (unsigned char *)p + off + it.klen;
		if (get32(e) & BUCKET_FLAG) {
			const unsigned char *v = it.val;
			uint64_t root;
			int err;

			if (it.vlen < BUCKET_HDR)
				return fail(r, "a bucket value shorter than its header", pgid);
			it.sub = calloc(1, sizeof(*it.sub));
			if (!it.sub)
				return fail(r, "out of memory", pgid);
			it.sub->seq = get64(v + 8);
			it.val = NULL;
			root = get64(v);
			if (add_item(bk, &it) < 0) {
				free(it.sub);
				return fail(r, "out of memory", pgid);
			}
			if (root == 0 && (it.vlen < BUCKET_HDR + HDR ||
					  !(get16(v + BUCKET_HDR + 8) & F_LEAF)))
				return fail(r, "an inline bucket that is not a leaf page", pgid);
			err = root ? read_page(r, root, it.sub, depth + 1) :
			      read_leaf(r, v + BUCKET_HDR, it.vlen - BUCKET_HDR, pgid,
					it.sub, depth + 1);
			if (err)
				return err;
			continue;
		}
		if (add_item(bk, &it) < 0)
			return fail(r, "out of memory", pgid);
	}
	return 0;
}

static int read_page(struct reader *r, uint64_t pgid, struct si_bolt_bucket *bk,
		     unsigned int depth)
{
	const unsigned char *p;
	uint64_t span;
	unsigned int flags, count, i;

	if (depth > MAX_DEPTH)
		return fail(r, "buckets nested too deep", pgid);
	if (pgid < 2 || pgid >= r->pages)
		return fail(r, "outside the file", pgid);
	if (r->seen[pgid / 8] & (1u << (pgid % 8)))
		return fail(r, "reached twice", pgid);
	r->seen[pgid / 8] |= (unsigned char)(1u << (pgid % 8));
	p = r->b + pgid * r->ps;
	flags = get16(p + 8);
	count = get16(p + 10);
	span = ((uint64_t)get32(p + 12) + 1) * r->ps;
	if (get32(p + 12) >= r->pages - pgid)
		return fail(r, "overflow pages outside the file", pgid);
	if (flags & F_LEAF)
		return read_leaf(r, p, span, pgid, bk, depth);
	if (!(flags & F_BRANCH))
		return fail(r, "neither a branch nor a leaf", pgid);
	if (HDR + (uint64_t)count * ELEM > span)
		return fail(r, "more elements than the page holds", pgid);
	for (i = 0; i < count; i++)
		if (read_page(r, get64(p + HDR + (size_t)i * ELEM + 8), bk, depth + 1))
			return -1;
	return 0;
}

int si_bolt_parse(const unsigned char *b, size_t n, struct si_bolt *db,
		  char *why, size_t size)
{
	const unsigned char *m0 = meta_at(b, n, 0), *m1 = NULL, *m;
	struct reader r = { .b = b, .why = why, .size = size };
	uint32_t ps;
	int err;

	memset(db, 0, sizeof(*db));
	/* The page size is in meta 0; if that one is torn, meta 1 is tried at each. */
	for (ps = m0 ? get32(m0 + 8) : 512; !m1 && ps <= 65536; ps *= 2) {
		m1 = meta_at(b, n, ps);
		if (m1 && get32(m1 + 8) != ps)
			m1 = NULL;
		if (m0)
			break;
	}
	m = m0 && (!m1 || get64(m0 + 48) >= get64(m1 + 48)) ? m0 : m1;
	if (!m) {
		snprintf(why, size, "no valid meta page: not a bolt database, or damaged");
		return -1;
	}
	r.ps = db->page_size = get32(m + 8);
	db->flags = get32(m + 12);
	db->txid = get64(m + 48);
	db->root.seq = get64(m + 24);
	r.pages = get64(m + 40);
	if (r.pages > n / r.ps)
		r.pages = n / r.ps;
	r.seen = calloc(r.pages / 8 + 1, 1);
	if (!r.seen) {
		snprintf(why, size, "out of memory");
		return -1;
	}
	err = read_page(&r, get64(m + 16), &db->root, 0);
	free(r.seen);
	if (err)
		si_bolt_free(db);
	return err;
}

/* ---- writing ---- */

struct writer {
	unsigned char *b;
	size_t cap;
	uint32_t ps;
	uint64_t next;		/* the next free page */
};

/* One item's bytes as stored: a value, or a bucket header (+ inline page). */
struct stored {
	unsigned char *v;
	uint32_t len;
	bool owned;
};

/* span pages at the end; returns the first's id, 0 if out of memory. */
static uint64_t alloc_pages(struct writer *w, uint64_t span)
{
	uint64_t id = w->next;
	size_t need = (size_t)((id + span) * w->ps);

	if (need > w->cap) {
		size_t cap = w->cap;
		unsigned char *p;

		while (cap < need)
			cap *= 2;
		p = realloc(w->b, cap);
		if (!p)
			return 0;
		memset(p + w->cap, 0, cap - w->cap);
		w->b = p;
		w->cap = cap;
	}
	w->next += span;
	return id;
}

static void page_header(unsigned char *p, uint64_t id, unsigned int flags,
			size_t count, uint64_t span)
{
	put64(p, id);
	put16(p + 8, (uint16_t)flags);
	put16(p + 10, (uint16_t)count);
	put32(p + 12, (uint32_t)(span - 1));
}

/* Items [0, nr) as one leaf page's elements and data at p. */
static void put_leaf(unsigned char *p, const struct si_bolt_item *it,
		     const struct stored *s, size_t nr)
{
	size_t d = HDR + nr * ELEM, i;

	for (i = 0; i < nr; i++) {
		unsigned char *e = p + HDR + i * ELEM;

		put32(e, it[i].sub ? BUCKET_FLAG : 0);
		put32(e + 4, (uint32_t)(d - (HDR + i * ELEM)));
		put32(e + 8, it[i].klen);
		put32(e + 12, s[i].len);
		memcpy(p + d, it[i].key, it[i].klen);
		if (s[i].len)
			memcpy(p + d + it[i].klen, s[i].v, s[i].len);
		d += it[i].klen + s[i].len;
	}
}

/* bolt keeps a bucket inline when it is one small leaf of plain values. */
static size_t inline_size(const struct si_bolt_bucket *bk, uint32_t ps)
{
	size_t size = HDR, i;

	for (i = 0; i < bk->nr; i++) {
		if (bk->items[i].sub)
			return 0;
		size += ELEM + bk->items[i].klen + bk->items[i].vlen;
		if (size > ps / 4)
			return 0;
	}
	return size;
}

static uint64_t write_bucket(struct writer *w, const struct si_bolt_bucket *bk);

static int store_item(struct writer *w, const struct si_bolt_item *it,
		      struct stored *s)
{
	const struct si_bolt_bucket *sub = it->sub;
	size_t in;
	uint64_t root = 0;

	*s = (struct stored){ it->val, it->vlen, false };
	if (!sub)
		return 0;
	in = inline_size(sub, w->ps);
	if (!in && !(root = write_bucket(w, sub)))
		return -1;
	s->len = (uint32_t)(BUCKET_HDR + in);
	s->v = calloc(1, s->len);
	if (!s->v)
		return -1;
	s->owned = true;
	put64(s->v, root);
	put64(s->v + 8, sub->seq);
	if (in) {
		struct stored *vals = calloc(sub->nr + 1, sizeof(*vals));
		size_t i;

		if (!vals)
			return -1;
		for (i = 0; i < sub->nr; i++)
			vals[i] = (struct stored){ sub->items[i].val, sub->items[i].vlen, false };
		page_header(s->v + BUCKET_HDR, 0, F_LEAF, sub->nr, 1);
		put_leaf(s->v + BUCKET_HDR, sub->items, vals, sub->nr);
		free(vals);
	}
	return 0;
}

/* One level of pages: the first key and page of each, for the level above. */
struct level {
	struct level_page {
		const unsigned char *key;
		uint32_t klen;
		uint64_t pgid;
	} *page;
	size_t nr;
};

static int level_add(struct level *l, const unsigned char *key, uint32_t klen,
		     uint64_t pgid)
{
	struct level_page *p = realloc(l->page, (l->nr + 1) * sizeof(*p));

	if (!p)
		return -1;
	l->page = p;
	l->page[l->nr++] = (struct level_page){ key, klen, pgid };
	return 0;
}

static void level_free(struct level *l)
{
	free(l->page);
	memset(l, 0, sizeof(*l));
}

/* Packs the items into leaf pages, as many to a page as fit. */
static int write_leaves(struct writer *w, const struct si_bolt_bucket *bk,
			struct stored *s, struct level *out)
{
	size_t i = 0;

	do {
		size_t j = i, size = HDR;
		uint64_t span, id;

		while (j < bk->nr && (j == i ||
		       size + ELEM + bk->items[j].klen + s[j].len <= w->ps)) {
			size += ELEM + bk->items[j].klen + s[j].len;
			j++;
		}
		span = (size + w->ps - 1) / w->ps;
		id = alloc_pages(w, span);
		if (!id)
			return -1;
		page_header(w->b + id * w->ps, id, F_LEAF, j - i, span);
		if (j > i)	/* an empty bucket has no items array */
			put_leaf(w->b + id * w->ps, bk->items + i, s + i, j - i);
		if (level_add(out, i < bk->nr ? bk->items[i].key : NULL,
			      i < bk->nr ? bk->items[i].klen : 0, id) < 0)
			return -1;
		i = j;
	} while (i < bk->nr);
	return 0;
}

/* Branch pages over one level of pages, into the level above. */
static int write_branches(struct writer *w, const struct level *in, struct level *out)
{
	size_t i = 0;

	while (i < in->nr) {
		size_t j = i, size = HDR, d, k;
		uint64_t span, id;
		unsigned char *p;

		/* Two keys at least, whatever their size, as bolt's pages:
		 * with one, a level of long keys is no smaller than the one
		 * below and the tree never gets a root. */
		while (j < in->nr && (j - i < 2 || size + ELEM + in->page[j].klen <= w->ps))
			size += ELEM + in->page[j++].klen;
		span = (size + w->ps - 1) / w->ps;
		id = alloc_pages(w, span);
		if (!id)
			return -1;
		p = w->b + id * w->ps;
		page_header(p, id, F_BRANCH, j - i, span);
		d = HDR + (j - i) * ELEM;
		for (k = i; k < j; k++) {
			unsigned char *e = p + HDR + (k - i) * ELEM;
			const struct level_page *c = &in->page[k];

			put32(e, (uint32_t)(d - (size_t)(e - p)));
			put32(e + 4, c->klen);
			put64(e + 8, c->pgid);
			memcpy(p + d, c->key, c->klen);
			d += c->klen;
		}
		if (level_add(out, in->page[i].key, in->page[i].klen, id) < 0)
			return -1;
		i = j;
	}
	return 0;
}

/* Writes a bucket (its nested buckets first); its root page, 0 on failure. */
static uint64_t write_bucket(struct writer *w, const struct si_bolt_bucket *bk)
{
	struct stored *s = calloc(bk->nr + 1, sizeof(*s));
	struct level lv = { 0 }, up;
	uint64_t root = 0;
	size_t i;
	int err = s ? 0 : -1;

	for (i = 0; !err && i < bk->nr; i++)
		err = store_item(w, &bk->items[i], &s[i]);
	if (!err)
		err = write_leaves(w, bk, s, &lv);
	while (!err && lv.nr > 1) {
		memset(&up, 0, sizeof(up));
		err = write_branches(w, &lv, &up);
		level_free(&lv);
		lv = up;
	}
	if (!err)
		root = lv.page[0].pgid;
	level_free(&lv);
	for (i = 0; s && i < bk->nr; i++)
		if (s[i].owned)
			free(s[i].v);
	free(s);
	return root;
}

static void put_meta(struct writer *w, uint64_t id, const struct si_bolt *db,
		     uint64_t root, uint64_t txid)
{
	unsigned char *p = w->b + id * w->ps, *m = p + HDR;

	page_header(p, id, F_META, 0, 1);
	put32(m, MAGIC);
	put32(m + 4, FORMAT_VERSION);
	put32(m + 8, w->ps);
	put32(m + 12, db->flags);
	put64(m + 16, root);
	put64(m + 24, db->root.seq);
	put64(m + 32, FREELIST_PAGE);
	put64(m + 40, w->next);
	put64(m + 48, txid);
	put64(m + META_SUMMED, fnv1a(m, META_SUMMED));
}

int si_bolt_render(const struct si_bolt *db, unsigned char **out, size_t *len)
{
	/* Pages 0 and 1 are the meta pages, 2 the freelist. */
	struct writer w = { .ps = db->page_size, .next = 3 };
	uint64_t root, t = db->txid + 1;

	w.cap = 64 * (size_t)w.ps;
	w.b = calloc(1, w.cap);
	if (!w.b)
		return -1;
	page_header(w.b + FREELIST_PAGE * w.ps, FREELIST_PAGE, F_FREELIST, 0, 1);
	root = write_bucket(&w, &db->root);
	if (!root)
		goto out_free;
	/* Meta page i is written by transactions of parity i. */
	put_meta(&w, t % 2, db, root, t);
	put_meta(&w, (t + 1) % 2, db, root, t + 1);
	*out = w.b;
	*len = (size_t)(w.next * w.ps);
	return 0;
out_free:
	free(w.b);
	return -1;
}

/* ---- the tree ---- */

int si_bolt_set(struct si_bolt_item *it, const void *v, size_t len)
{
	unsigned char *p = malloc(len ? len : 1);

	if (!p || len > UINT32_MAX) {
		free(p);
		return -1;
	}
	memcpy(p, v, len);
	if (it->owned)
		free(it->val);
	it->val = p;
	it->vlen = (uint32_t)len;
	it->owned = true;
	return 0;
}

static void free_bucket(struct si_bolt_bucket *bk)
{
	size_t i;

	for (i = 0; i < bk->nr; i++) {
		if (bk->items[i].owned)
			free(bk->items[i].val);
		if (bk->items[i].sub) {
			free_bucket(bk->items[i].sub);
			free(bk->items[i].sub);
		}
	}
	free(bk->items);
}

void si_bolt_free(struct si_bolt *db)
{
	free_bucket(&db->root);
	memset(&db->root, 0, sizeof(db->root));
}
