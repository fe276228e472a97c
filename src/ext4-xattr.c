// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * ext4 xattr areas, in the inode body and in EA blocks.
 *
 * Only three kinds of value change: POSIX ACLs (ext4's compact format,
 * same length), security.capability (v2 grows to v3 by 4 bytes, v3 may
 * shrink back to v2) and user.containers.override_stat (its decimal ids
 * change length).  When a length changes, the values below it move, as
 * the kernel lays them out; entries keep their order and names, so a
 * sorted EA block stays sorted.  A grown value that no longer fits
 * leaves the area with its entry, as the kernel would move it: from the
 * inode body to an EA block, or from an unshared EA block to the inode
 * body; ext4.c and ext4-eablock.c decide where it goes.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ext4.h"
#include "le.h"

#define XA_MAGIC		0xEA020000u
#define XA_HDR_SIZE		32	/* struct ext2_ext_attr_header */
#define XA_ENTRY_SIZE		16	/* struct ext2_ext_attr_entry, no name */
#define XA_ENTRY_LEN(n)		(((n) + XA_ENTRY_SIZE + 3u) & ~3u)
#define XA_PAD(s)		(((s) + 3u) & ~3u)

/* Name indexes (fs/ext4/xattr.h). */
#define XA_INDEX_USER		1
#define XA_INDEX_ACL_ACCESS	2
#define XA_INDEX_ACL_DEFAULT	3
#define XA_INDEX_SECURITY	6

/* Entry field offsets. */
#define E_NAME_LEN	0
#define E_NAME_INDEX	1
#define E_VALUE_OFFS	2
#define E_VALUE_INUM	4
#define E_VALUE_SIZE	8
#define E_HASH		12
#define E_NAME		16

static enum si_xattr_kind entry_kind(const unsigned char *e)
{
	unsigned int len = e[E_NAME_LEN];
	const char *name = (const char *)e + E_NAME;

	switch (e[E_NAME_INDEX]) {
	case XA_INDEX_ACL_ACCESS:
	case XA_INDEX_ACL_DEFAULT:
		return len == 0 ? SI_XA_ACL : SI_XA_NONE;
	case XA_INDEX_SECURITY:
		return len == 10 && !memcmp(name, "capability", 10) ?
			SI_XA_CAP : SI_XA_NONE;
	case XA_INDEX_USER:
		return len == 24 && !memcmp(name, "containers.override_stat", 24) ?
			SI_XA_OVERRIDE : SI_XA_NONE;
	}
	return SI_XA_NONE;
}

static const char *kind_name(enum si_xattr_kind k)
{
	switch (k) {
	case SI_XA_ACL:
		return "POSIX ACL";
	case SI_XA_CAP:
		return "security.capability";
	case SI_XA_OVERRIDE:
		return "user.containers.override_stat";
	default:
		return "xattr";
	}
}

/* One entry of an area being shifted. */
struct xa_ent {
	unsigned char *e;
	uint32_t offs, size;		/* where the value is now */
	const unsigned char *nval;	/* its new value, NULL if unchanged */
	uint32_t nsize;
};

/* Names the object an area belongs to in messages. */
static int area_error(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk, int err,
		      const char *what)
{
	char path[4096];

	e4_path(c, ino, path, sizeof(path));
	if (blk)
		return si_error(c->h, err, "%s: %s: EA block %llu: %s; nothing was changed",
				c->name, path, (unsigned long long)blk, what);
	return si_error(c->h, err, "%s: %s: in-inode xattrs: %s; nothing was changed",
			c->name, path, what);
}

/*
 * Walks the entries, checking each one and its value lie inside the
 * area and the values after the entries; returns their number, or -1.
 * *lastp is set to the terminating entry.
 */
static int walk_entries(unsigned char *base, unsigned char *first,
			unsigned char *end, struct xa_ent *ents, size_t max,
			unsigned char **lastp)
{
	unsigned char *p = first;
	size_t n = 0;

	while (end - p >= 4 && get32(p) != 0) {
		uint32_t elen;

		if (end - p < XA_ENTRY_SIZE || n == max)
			return -1;
		elen = XA_ENTRY_LEN(p[E_NAME_LEN]);
		if ((size_t)(end - p) < elen + 4)
			return -1;
		ents[n].e = p;
		ents[n].offs = get16(p + E_VALUE_OFFS);
		ents[n].size = get32(p + E_VALUE_SIZE);
		ents[n].nval = NULL;
		ents[n].nsize = ents[n].size;
		n++;
		p += elen;
	}
	if (end - p < 4)
		return -1;
	*lastp = p;
	for (size_t i = 0; i < n; i++) {
		if (get32(ents[i].e + E_VALUE_INUM) || ents[i].size == 0)
			continue;
		if (base + ents[i].offs < p + 4 ||
		    ents[i].size > (size_t)(end - base) ||
		    ents[i].offs > (size_t)(end - base) - ents[i].size)
			return -1;
	}
	return (int)n;
}

/* Applies the rule a value needs; the new value goes to out. */
static int shift_value(struct e4_ctx *c, enum si_xattr_kind k,
		       const unsigned char *in, uint32_t len,
		       unsigned char *out, uint32_t *outlen)
{
	struct si_tally *t = c->replay ? NULL : &c->h->tally;
	size_t olen = len;
	int res;

	switch (k) {
	case SI_XA_ACL:
		res = si_acl_ext4(&c->h->rules, in, len, out, t);
		break;
	case SI_XA_CAP:
		res = si_cap(&c->h->rules, in, len, out, &olen, t);
		break;
	case SI_XA_OVERRIDE:
		res = si_override_stat(&c->h->rules, in, len, out, &olen, t);
		break;
	default:
		return 0;
	}
	*outlen = (uint32_t)olen;
	return res;
}

static void count_value(struct e4_ctx *c, enum si_xattr_kind k)
{
	struct shiftimg_stats *st = &c->h->tally.st;

	if (c->replay)
		return;
	if (k == SI_XA_ACL)
		st->acls++;
	else if (k == SI_XA_CAP)
		st->caps++;
	else if (k == SI_XA_OVERRIDE)
		st->override_stat++;
}

/* ---- entries on the move ---- */

#define MV_HDR	6	/* index, name length, value size */

static int moved_add(struct e4_ctx *c, struct e4_moved *m, const unsigned char *e,
		     const unsigned char *val, uint32_t size)
{
	size_t need = MV_HDR + e[E_NAME_LEN] + (size_t)size;
	unsigned char *p;

	if (m->len + need > m->cap) {
		size_t cap = (m->len + need) * 2;

		p = realloc(m->buf, cap);
		if (!p)
			return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
		m->buf = p;
		m->cap = cap;
	}
	p = m->buf + m->len;
	p[0] = e[E_NAME_INDEX];
	p[1] = e[E_NAME_LEN];
	put32(p + 2, size);
	memcpy(p + MV_HDR, e + E_NAME, e[E_NAME_LEN]);
	memcpy(p + MV_HDR + e[E_NAME_LEN], val, size);
	m->len += need;
	m->nr++;
	return 0;
}

/* The record after p, or NULL at the end. */
static const unsigned char *moved_next(const struct e4_moved *m,
				       const unsigned char *p)
{
	p = p ? p + MV_HDR + p[1] + get32(p + 2) : m->buf;
	return p && p < m->buf + m->len ? p : NULL;
}

const char *e4_moved_names(const struct e4_moved *m)
{
	const unsigned char *p = moved_next(m, NULL);
	unsigned char e[E_NAME + 255];

	if (!p || m->nr != 1)
		return "security.capability and override_stat";
	e[E_NAME_INDEX] = p[0];
	e[E_NAME_LEN] = p[1];
	memcpy(e + E_NAME, p + MV_HDR, p[1]);
	return kind_name(entry_kind(e));
}

bool e4_moved_same(const struct e4_moved *a, const struct e4_moved *b)
{
	return a->len == b->len && !memcmp(a->buf, b->buf, a->len);
}

int e4_moved_copy(struct e4_ctx *c, struct e4_moved *to, const struct e4_moved *from)
{
	to->buf = malloc(from->len ? from->len : 1);
	if (!to->buf)
		return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
	memcpy(to->buf, from->buf, from->len);
	to->len = to->cap = from->len;
	to->nr = from->nr;
	return 0;
}

void e4_moved_free(struct e4_moved *m)
{
	free(m->buf);
	*m = (struct e4_moved){ 0 };
}

/*
 * Packs every value again from the end of the area, in entry order;
 * fails (changing nothing) if they no longer fit after the entries.
 */
static int repack(struct e4_ctx *c, struct xa_ent *ents, int n,
		  unsigned char *base, unsigned char *last, unsigned char *end)
{
	size_t area = (size_t)(end - base);
	size_t floor = (size_t)(last + 4 - base);
	unsigned char *old = c->scratch;
	size_t cur = area;
	int i;

	for (i = 0; i < n; i++) {
		if (get32(ents[i].e + E_VALUE_INUM) || ents[i].nsize == 0)
			continue;
		if (cur - floor < XA_PAD(ents[i].nsize))
			return -ENOSPC;
		cur -= XA_PAD(ents[i].nsize);
	}

	memcpy(old, base, area);
	memset(base + floor, 0, area - floor);
	cur = area;
	for (i = 0; i < n; i++) {
		const unsigned char *v;

		if (get32(ents[i].e + E_VALUE_INUM) || ents[i].nsize == 0)
			continue;
		v = ents[i].nval ? ents[i].nval : old + ents[i].offs;
		cur -= XA_PAD(ents[i].nsize);
		memcpy(base + cur, v, ents[i].nsize);
		put16(ents[i].e + E_VALUE_OFFS, (uint16_t)cur);
		put32(ents[i].e + E_VALUE_SIZE, ents[i].nsize);
		ents[i].offs = (uint32_t)cur;
		ents[i].size = ents[i].nsize;
	}
	return 0;
}

static bool stored(const struct xa_ent *x)
{
	return !get32(x->e + E_VALUE_INUM) && x->size != 0;
}

/*
 * Moves the values below entry i by d bytes (down when d > 0) so that
 * its padded value grows by d with its end in place; offsets follow.
 */
static void make_room(struct xa_ent *ents, int n, int i, unsigned char *base,
		      size_t *min, long d)
{
	size_t o = ents[i].offs;

	memmove(base + *min - d, base + *min, o - *min);
	if (d < 0)
		memset(base + *min, 0, (size_t)-d);
	for (int j = 0; j < n; j++)
		if (j != i && stored(&ents[j]) && ents[j].offs < o) {
			ents[j].offs = (uint32_t)(ents[j].offs - d);
			put16(ents[j].e + E_VALUE_OFFS, (uint16_t)ents[j].offs);
		}
	*min -= d;
	ents[i].offs = (uint32_t)(o - d);
}

/*
 * Resizes the changed values where they are, moving only the values
 * below each one, as the kernel lays them out: every other byte stays,
 * so shifting back gives the area back exactly.  Shrinking values go
 * first, so the room they free serves the growing ones.  Fails
 * (changing nothing) if the values would reach the entries.
 */
static int resize_in_place(struct xa_ent *ents, int n, unsigned char *base,
			   unsigned char *last, unsigned char *end)
{
	size_t floor = (size_t)(last + 4 - base), area = (size_t)(end - base);
	size_t min = area;
	long grow = 0;

	for (int i = 0; i < n; i++) {
		if (!stored(&ents[i]))
			continue;
		if (ents[i].offs < min)
			min = ents[i].offs;
		if (ents[i].nval)
			grow += (long)XA_PAD(ents[i].nsize) - (long)XA_PAD(ents[i].size);
	}
	/* Moved values must be aligned and whole inside the area. */
	for (int i = 0; i < n; i++)
		if (ents[i].nval && (!stored(&ents[i]) || ents[i].offs % 4 ||
				     ents[i].offs + XA_PAD(ents[i].size) > area))
			return -ENOSPC;
	if (min < floor || (grow > 0 && min - floor < (size_t)grow))
		return -ENOSPC;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n; i++) {
			long d;

			if (!ents[i].nval)
				continue;
			d = (long)XA_PAD(ents[i].nsize) - (long)XA_PAD(ents[i].size);
			if ((pass == 0 && d < 0) || (pass == 1 && d > 0))
				make_room(ents, n, i, base, &min, d);
		}
	for (int i = 0; i < n; i++) {
		if (!ents[i].nval)
			continue;
		memset(base + ents[i].offs, 0, XA_PAD(ents[i].nsize));
		memcpy(base + ents[i].offs, ents[i].nval, ents[i].nsize);
		put16(ents[i].e + E_VALUE_OFFS, (uint16_t)ents[i].offs);
		put32(ents[i].e + E_VALUE_SIZE, ents[i].nsize);
		ents[i].size = ents[i].nsize;
	}
	return 0;
}

/*
 * Takes entry i and its value out of the area, as the kernel removes
 * one: the values below it move up, the entries after it move down.
 */
static void remove_entry(struct xa_ent *ents, int *n, int i, unsigned char *base,
			 unsigned char **last)
{
	unsigned char *e = ents[i].e;
	unsigned int elen = XA_ENTRY_LEN(e[E_NAME_LEN]);
	size_t min = (size_t)-1;

	for (int j = 0; j < *n; j++)
		if (stored(&ents[j]) && ents[j].offs < min)
			min = ents[j].offs;
	if (stored(&ents[i]))
		make_room(ents, *n, i, base, &min, -(long)XA_PAD(ents[i].size));
	memmove(e, e + elen, (size_t)(*last + 4 - (e + elen)));
	memset(*last + 4 - elen, 0, elen);
	*last -= elen;
	for (int j = i + 1; j < *n; j++)
		ents[j].e -= elen;
	memmove(&ents[i], &ents[i + 1], (size_t)(*n - i - 1) * sizeof(*ents));
	(*n)--;
}

/*
 * Resizes the changed values; when they do not fit, takes the growing
 * entries out one at a time, in entry order, into out, until the rest
 * fits.  Returns 0, E4_MOVED, or -ENOSPC with nothing changed.
 */
static int resize_or_move(struct e4_ctx *c, struct xa_ent *ents, int *n,
			  unsigned char *base, unsigned char *last,
			  unsigned char *end, struct e4_moved *out)
{
	int moved = 0;

	/* Repacking every value finds the room gaps between them hold. */
	while (resize_in_place(ents, *n, base, last, end) < 0 &&
	       repack(c, ents, *n, base, last, end) < 0) {
		int i;

		for (i = 0; i < *n; i++)
			if (ents[i].nval && XA_PAD(ents[i].nsize) > XA_PAD(ents[i].size))
				break;
		if (!out || i == *n)
			return -ENOSPC;
		if (moved_add(c, out, ents[i].e, ents[i].nval, ents[i].nsize) < 0)
			return -ENOMEM;
		remove_entry(ents, n, i, base, &last);
		moved = E4_MOVED;
	}
	return moved;
}

/* Computes the new values into the scratch space after the area copy. */
static int shift_values(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk,
			struct xa_ent *ents, int n, unsigned char *base,
			bool *resize)
{
	unsigned char *out = c->scratch + 2 * c->bsz;
	int res = 0;

	for (int i = 0; i < n; i++) {
		enum si_xattr_kind k = entry_kind(ents[i].e);
		uint32_t nlen;
		int r;

		if (k == SI_XA_NONE)
			continue;
		if (get32(ents[i].e + E_VALUE_INUM))
			return area_error(c, ino, blk, ENOTSUP,
					  "a value stored in an EA inode needs shifting; not supported");
		r = shift_value(c, k, base + ents[i].offs, ents[i].size, out, &nlen);
		if (r < 0)
			return area_error(c, ino, blk, EUCLEAN, kind_name(k));
		res |= r;
		if (!(r & SI_CHANGED))
			continue;
		if (k == SI_XA_CAP &&
		    si_cap_grants_root(base + ents[i].offs, ents[i].size, out, nlen))
			res |= E4_PRIV_CAP;
		count_value(c, k);
		ents[i].nval = out;
		ents[i].nsize = nlen;
		*resize |= nlen != ents[i].size;
		out += XA_PAD(nlen);
	}
	return res;
}

/* The refusal for a grown value with nowhere to go. */
static int no_room(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk,
		   enum e4_area kind, const unsigned char *base)
{
	char what[256];

	if (kind == E4_AREA_BLOCK && get32(base + 4) > 1)
		snprintf(what, sizeof(what),
			 "no room for the grown security.capability or override_stat value in this EA block, shared by %u inodes (a shared block is not copied for a value that outgrows it)",
			 get32(base + 4));
	else if (kind == E4_AREA_BLOCK && c->isz <= EXT2_GOOD_OLD_INODE_SIZE)
		snprintf(what, sizeof(what),
			 "no room for the grown security.capability or override_stat value in this EA block (128-byte inodes hold no xattrs)");
	else if (kind == E4_AREA_BLOCK)
		snprintf(what, sizeof(what),
			 "no room for the grown security.capability or override_stat value in this EA block, nor in the inode");
	else
		snprintf(what, sizeof(what),
			 "no room for the grown security.capability or override_stat value");
	return area_error(c, ino, blk, ENOSPC, what);
}

int e4_xattr_area(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk,
		  enum e4_area kind, unsigned char *base, unsigned char *first,
		  unsigned char *end, struct e4_moved *out)
{
	struct xa_ent ents[(65536 - XA_HDR_SIZE) / XA_ENTRY_SIZE];
	unsigned char *last;
	bool resize = false;
	int n, res, moved = 0;

	n = walk_entries(base, first, end, ents, sizeof(ents) / sizeof(ents[0]),
			 &last);
	if (n < 0)
		return area_error(c, ino, blk, EUCLEAN, "entries or values out of bounds");
	res = shift_values(c, ino, blk, ents, n, base, &resize);
	if (res < 0 || !(res & SI_CHANGED))
		return res;

	if (!resize) {
		for (int i = 0; i < n; i++)
			if (ents[i].nval)
				memcpy(base + ents[i].offs, ents[i].nval, ents[i].nsize);
	} else {
		moved = resize_or_move(c, ents, &n, base, last, end, out);
		if (moved == -ENOMEM)
			return moved;
		if (moved < 0)
			return no_room(c, ino, blk, kind, base);
	}

	for (int i = 0; i < n; i++) {
		struct ext2_ext_attr_entry *e = (void *)ents[i].e;

		if (!ents[i].nval)
			continue;
		/* Old kernels left in-inode hashes zero, and e2fsck accepts that. */
		if (kind == E4_AREA_INODE && get32(ents[i].e + E_HASH) == 0)
			continue;
		put32(ents[i].e + E_HASH,
		      ext2fs_ext_attr_hash_entry(e, base + ents[i].offs));
	}
	return res | moved;
}

/* The terminating entry of an area (already walked, so well formed). */
static unsigned char *last_entry(unsigned char *first)
{
	while (get32(first) != 0)
		first += XA_ENTRY_LEN(first[E_NAME_LEN]);
	return first;
}

void e4_xattr_block_seal(struct e4_ctx *c, blk64_t blk, unsigned char *buf,
			 bool hash)
{
	struct ext2_ext_attr_header *hdr = (void *)buf;

	/*
	 * The block hash folds the entry hashes; mbcache shares by it.
	 * libext2fs writes blocks with no hash (never shared): keep that.
	 */
	if (hash || get32(buf + 12))
		ext2fs_ext_attr_block_rehash(hdr, (struct ext2_ext_attr_entry *)
					     last_entry(buf + XA_HDR_SIZE));
	if (c->csum)
		ext2fs_ext_attr_block_csum_set(c->fs, 0, blk, hdr);
}

int e4_xattr_block(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk,
		   unsigned char *buf, struct e4_moved *out)
{
	struct ext2_ext_attr_header *hdr = (void *)buf;
	int res;

	if (get32(buf) != XA_MAGIC || get32(buf + 8) != 1)
		return area_error(c, ino, blk, EUCLEAN, "bad magic or block count");
	if (c->csum && !ext2fs_ext_attr_block_csum_verify(c->fs, ino, blk, hdr))
		return area_error(c, ino, blk, EUCLEAN, "checksum does not match");

	/* A shared block's values belong to every inode sharing it. */
	res = e4_xattr_area(c, ino, blk, E4_AREA_BLOCK, buf, buf + XA_HDR_SIZE,
			    buf + c->bsz, get32(buf + 4) == 1 ? out : NULL);
	if (res > 0 && (res & SI_CHANGED))
		e4_xattr_block_seal(c, blk, buf, false);
	return res;
}

void e4_xattr_block_init(unsigned char *buf, unsigned int bsz)
{
	memset(buf, 0, bsz);
	put32(buf, XA_MAGIC);
	put32(buf + 4, 1);	/* h_refcount */
	put32(buf + 8, 1);	/* h_blocks */
}

static int name_cmp(const unsigned char *rec, const unsigned char *e)
{
	if (rec[0] != e[E_NAME_INDEX])
		return rec[0] < e[E_NAME_INDEX] ? -1 : 1;
	if (rec[1] != e[E_NAME_LEN])
		return rec[1] < e[E_NAME_LEN] ? -1 : 1;
	return memcmp(rec + MV_HDR, e + E_NAME, rec[1]);
}

/* Writes one record's entry at e and its value just below *min. */
static void put_entry(unsigned char *base, unsigned char *e, size_t *min,
		      const unsigned char *rec)
{
	uint32_t size = get32(rec + 2);
	unsigned int elen = XA_ENTRY_LEN(rec[1]);

	*min -= XA_PAD(size);
	memset(base + *min, 0, XA_PAD(size));
	memcpy(base + *min, rec + MV_HDR + rec[1], size);
	memset(e, 0, elen);
	e[E_NAME_LEN] = rec[1];
	e[E_NAME_INDEX] = rec[0];
	put16(e + E_VALUE_OFFS, (uint16_t)*min);
	put32(e + E_VALUE_SIZE, size);
	memcpy(e + E_NAME, rec + MV_HDR, rec[1]);
	put32(e + E_HASH, ext2fs_ext_attr_hash_entry((struct ext2_ext_attr_entry *)e,
						     base + *min));
}

int e4_xattr_insert(enum e4_area kind, unsigned char *base,
		    unsigned char *first, unsigned char *end,
		    const struct e4_moved *m)
{
	struct xa_ent ents[(65536 - XA_HDR_SIZE) / XA_ENTRY_SIZE];
	unsigned char *last;
	size_t min = (size_t)(end - base), need = 0;
	const unsigned char *rec;
	int n;

	n = walk_entries(base, first, end, ents, sizeof(ents) / sizeof(ents[0]), &last);
	if (n < 0)
		return -EUCLEAN;
	for (int i = 0; i < n; i++)
		if (stored(&ents[i]) && ents[i].offs < min)
			min = ents[i].offs;
	for (rec = moved_next(m, NULL); rec; rec = moved_next(m, rec))
		need += XA_ENTRY_LEN(rec[1]) + XA_PAD(get32(rec + 2));
	if (min < (size_t)(last + 4 - base) || min - (size_t)(last + 4 - base) < need)
		return -ENOSPC;
	for (rec = moved_next(m, NULL); rec; rec = moved_next(m, rec)) {
		unsigned int elen = XA_ENTRY_LEN(rec[1]);
		unsigned char *at = last;

		if (kind == E4_AREA_BLOCK)
			for (at = first; at < last && name_cmp(rec, at) > 0;)
				at += XA_ENTRY_LEN(at[E_NAME_LEN]);
		memmove(at + elen, at, (size_t)(last + 4 - at));
		put_entry(base, at, &min, rec);
		last += elen;
	}
	return 0;
}
