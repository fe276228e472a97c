// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * ext4 xattr areas, in the inode body and in EA blocks.
 *
 * Only three kinds of value change: POSIX ACLs (ext4's compact format,
 * same length), security.capability (v2 grows to v3 by 4 bytes, v3 may
 * shrink back to v2) and user.containers.override_stat (its decimal ids
 * change length).  When a length changes, every value of the area is
 * packed again from its end; entries keep their order and names, so a
 * sorted EA block stays sorted.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "ext4.h"

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

static uint16_t get16(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static void put16(unsigned char *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static void put32(unsigned char *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

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

int e4_xattr_area(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk,
		  enum e4_area kind, unsigned char *base, unsigned char *first,
		  unsigned char *end)
{
	struct xa_ent ents[(65536 - XA_HDR_SIZE) / XA_ENTRY_SIZE];
	unsigned char *last;
	bool resize = false;
	int n, res;

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
	} else if (resize_in_place(ents, n, base, last, end) < 0 &&
		   /* Repacking every value finds the room gaps between them hold. */
		   repack(c, ents, n, base, last, end) < 0) {
		return area_error(c, ino, blk, ENOSPC,
				  "no room for the grown security.capability or override_stat value");
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
	return res;
}

int e4_xattr_block(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk,
		   unsigned char *buf)
{
	struct ext2_ext_attr_header *hdr = (void *)buf;
	unsigned char *end = buf + c->bsz;
	unsigned char *last;
	int res;

	if (get32(buf) != XA_MAGIC || get32(buf + 8) != 1)
		return area_error(c, ino, blk, EUCLEAN, "bad magic or block count");
	if (c->csum && !ext2fs_ext_attr_block_csum_verify(c->fs, ino, blk, hdr))
		return area_error(c, ino, blk, EUCLEAN, "checksum does not match");

	res = e4_xattr_area(c, ino, blk, E4_AREA_BLOCK, buf, buf + XA_HDR_SIZE, end);
	if (res <= 0 || !(res & SI_CHANGED))
		return res;

	/*
	 * The block hash folds the entry hashes; mbcache shares by it.
	 * libext2fs writes blocks with no hash (never shared): keep that.
	 */
	last = buf + XA_HDR_SIZE;
	while (get32(last) != 0)
		last += XA_ENTRY_LEN(last[E_NAME_LEN]);
	if (get32(buf + 12))
		ext2fs_ext_attr_block_rehash(hdr, (struct ext2_ext_attr_entry *)last);
	if (c->csum)
		ext2fs_ext_attr_block_csum_set(c->fs, ino, blk, hdr);
	return res;
}
