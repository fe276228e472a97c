// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The EA blocks of an ext4 run.  Planning meets each block through the
 * inodes that point at it: the first to meet it checks that it is an
 * allocated data block, shifts it once (ext4-xattr.c) and keeps the
 * result within a memory budget, in a table the planning threads
 * share; later inodes only learn what it held.  Values that outgrow an
 * inode body are then given a block: a new one, shared as the kernel
 * would share it, or the inode's own, in place or as a copy.  Writing
 * puts every changed and new block in place.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "ext4.h"
#include "le.h"

/* ---- EA blocks ---- */

static int range_cmp(const void *a, const void *b)
{
	const struct e4_range *x = a, *y = b;

	return x->first < y->first ? -1 : x->first > y->first;
}

static int add_range(struct e4_ctx *c, size_t *cap, blk64_t first, blk64_t n)
{
	if (!n)
		return 0;
	if (c->sh->nr_meta == *cap) {
		size_t ncap = *cap ? *cap * 2 : 256;
		struct e4_range *m = realloc(c->sh->meta, ncap * sizeof(*m));

		if (!m)
			return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
		c->sh->meta = m;
		*cap = ncap;
	}
	c->sh->meta[c->sh->nr_meta++] = (struct e4_range){ first, first + n - 1 };
	return 0;
}

/*
 * The static metadata an EA block may never be: superblocks, group
 * descriptors, bitmaps and inode tables.  Built when the first EA block
 * is met, with the block bitmap an EA block must be marked in.
 */
static int build_meta(struct e4_ctx *c)
{
	ext2_filsys fs = c->fs;
	blk64_t old_blocks = ext2fs_has_feature_meta_bg(fs->super) ?
		fs->super->s_first_meta_bg :
		fs->desc_blocks + fs->super->s_reserved_gdt_blocks;
	size_t cap = 0;
	errcode_t err;
	int e = 0;

	err = ext2fs_read_block_bitmap(fs);
	if (err)
		return e4_fail(c, err, "reading the block bitmaps");
	c->sh->have_bbitmap = true;
	for (dgrp_t g = 0; !e && g < fs->group_desc_count; g++) {
		blk64_t super, old_desc, new_desc;
		blk_t used;

		ext2fs_super_and_bgd_loc2(fs, g, &super, &old_desc, &new_desc, &used);
		e = add_range(c, &cap, super, super || g == 0 ? 1 : 0);
		if (!e && old_desc)
			e = add_range(c, &cap, old_desc, old_blocks);
		if (!e)
			e = add_range(c, &cap, new_desc, new_desc ? 1 : 0);
		if (!e)
			e = add_range(c, &cap, ext2fs_block_bitmap_loc(fs, g), 1);
		if (!e)
			e = add_range(c, &cap, ext2fs_inode_bitmap_loc(fs, g), 1);
		if (!e)
			e = add_range(c, &cap, ext2fs_inode_table_loc(fs, g),
				      fs->inode_blocks_per_group);
	}
	if (e)
		return e;
	qsort(c->sh->meta, c->sh->nr_meta, sizeof(*c->sh->meta), range_cmp);
	/* A running maximum of the ends makes one binary search enough. */
	for (size_t i = 1; i < c->sh->nr_meta; i++)
		if (c->sh->meta[i].last < c->sh->meta[i - 1].last)
			c->sh->meta[i].last = c->sh->meta[i - 1].last;
	return 0;
}

static bool in_meta(const struct e4_ctx *c, blk64_t blk)
{
	size_t lo = 0, hi = c->sh->nr_meta;

	/* The last range starting at or before blk, whose end is the maximum so far. */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (c->sh->meta[mid].first <= blk)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && c->sh->meta[lo - 1].last >= blk;
}

static int check_ea_blk(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk)
{
	ext2_filsys fs = c->fs;
	int err;

	if (!c->sh->have_bbitmap) {
		err = build_meta(c);
		if (err)
			return err;
	}
	if (blk < fs->super->s_first_data_block || blk >= ext2fs_blocks_count(fs->super) ||
	    in_meta(c, blk) || !ext2fs_test_block_bitmap2(fs->block_map, blk))
		return si_error(c->h, EUCLEAN,
				"%s: inode %u: EA block %llu is not an allocated data block; nothing was changed",
				c->name, ino, (unsigned long long)blk);
	return 0;
}

static size_t ea_slot(const struct e4_ctx *c, blk64_t blk)
{
	uint64_t x = blk * 0x9e3779b97f4a7c15ull;

	return (size_t)(x >> 17) & (c->sh->ea_cap - 1);
}

static struct e4_ea *ea_lookup(struct e4_ctx *c, blk64_t blk)
{
	size_t i = ea_slot(c, blk);

	while (c->sh->ea[i].blk && c->sh->ea[i].blk != blk)
		i = (i + 1) & (c->sh->ea_cap - 1);
	return &c->sh->ea[i];
}

static int ea_grow(struct e4_ctx *c)
{
	struct e4_ea *old = c->sh->ea;
	size_t n = c->sh->ea_cap;

	c->sh->ea_cap = n ? n * 2 : 1024;
	c->sh->ea = calloc(c->sh->ea_cap, sizeof(*c->sh->ea));
	if (!c->sh->ea) {
		c->sh->ea = old;
		c->sh->ea_cap = n;
		return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
	}
	for (size_t i = 0; i < n; i++)
		if (old[i].blk)
			*ea_lookup(c, old[i].blk) = old[i];
	free(old);
	return 0;
}

/*
 * Reads one EA block and shifts it in buf.  Values that outgrow an
 * unshared block go to c->pull, for the inode body, if inodes have one.
 */
static int ea_compute(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk,
		      unsigned char *buf)
{
	errcode_t err = io_channel_read_blk64(c->fs->io, blk, 1, buf);

	if (err)
		return e4_fail(c, err, "reading EA block %llu", (unsigned long long)blk);
	c->pull.len = c->pull.nr = 0;
	return e4_xattr_block(c, ino, blk, buf,
			      c->isz > EXT2_GOOD_OLD_INODE_SIZE ? &c->pull : NULL);
}

/* Keeps a shifted block if the budget allows; replays it otherwise. */
static unsigned char *keep(struct e4_ctx *c, unsigned char *buf, size_t len)
{
	if (c->sh->kept + len > c->sh->budget) {
		free(buf);
		return NULL;
	}
	c->sh->kept += len;
	return buf;
}

static int ea_met(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk)
{
	struct e4_ea *e;
	unsigned char *buf;
	int res;

	if (c->sh->ea_nr * 2 >= c->sh->ea_cap && ea_grow(c) < 0)
		return -ENOMEM;
	e = ea_lookup(c, blk);
	if (e->blk) {
		if ((e->res & SI_UNMAPPED) && !c->replay)
			c->h->tally.pending = true;
		if (!c->replay)
			e->nref++;
		return (int)e->res;
	}
	res = check_ea_blk(c, ino, blk);
	if (res < 0)
		return res;
	buf = malloc(c->bsz);
	if (!buf)
		return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
	res = ea_compute(c, ino, blk, buf);
	if (res >= 0 && (res & E4_MOVED)) {
		/* Its grown values go to the body of the one inode using it. */
		e->edit = calloc(1, sizeof(*e->edit));
		if (!e->edit || e4_moved_copy(c, &e->edit->pulled, &c->pull) < 0) {
			free(e->edit);
			e->edit = NULL;
			res = si_error(c->h, ENOMEM, "%s: out of memory", c->name);
		}
	}
	if (res < 0) {
		free(buf);
		return res;
	}
	e->blk = blk;
	e->res = (unsigned int)res;
	e->nref = 1;
	e->buf = res & SI_CHANGED ? keep(c, buf, c->bsz) : (free(buf), NULL);
	c->sh->ea_nr++;
	return res;
}

/*
 * Shifts an inode's EA block the first time one of its inodes is met;
 * later inodes sharing it only learn what it held.  Planning threads
 * meet blocks in any order: whoever comes first shifts the block.
 */
int e4_ea_visit(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk)
{
	int res;

	pthread_mutex_lock(&c->sh->lock);
	res = ea_met(c, ino, blk);
	pthread_mutex_unlock(&c->sh->lock);
	return res;
}

/* The edit planned for a known EA block (the table may grow meanwhile). */
const struct e4_edit *e4_ea_edit(struct e4_ctx *c, blk64_t blk)
{
	const struct e4_edit *ed;

	pthread_mutex_lock(&c->sh->lock);
	ed = ea_lookup(c, blk)->edit;
	pthread_mutex_unlock(&c->sh->lock);
	return ed;
}

/* ---- where spilled values go ---- */

#define REFCOUNT_MAX	1024	/* the kernel shares an EA block no further */

/* The shifted contents of a known EA block, before any edit. */
static int ea_base(struct e4_ctx *c, const struct e4_ea *e, unsigned char *buf)
{
	int res;

	if (e->buf) {
		memcpy(buf, e->buf, c->bsz);
		return 0;
	}
	c->replay = true;
	res = ea_compute(c, 0, e->blk, buf);
	c->replay = false;
	return res < 0 ? res : 0;
}

/* Would an EA block holding buf take the entries m too?  buf changes. */
static bool fits(const struct e4_ctx *c, unsigned char *buf, const struct e4_moved *m)
{
	return !e4_xattr_insert(E4_AREA_BLOCK, buf, buf + E4_XA_HDR, buf + c->bsz, m);
}

/*
 * Picks a free block near the inode, as the kernel does, and marks it
 * in the in-memory bitmap only: the counts, descriptors and bitmaps on
 * disk change when the block is written (e4_write_new()).
 */
static int new_block(struct e4_ctx *c, ext2_ino_t ino, blk64_t from, uint32_t refs,
		     const struct e4_moved *m, blk64_t *blk)
{
	ext2_filsys fs = c->fs;
	blk64_t goal = ext2fs_group_first_block2(fs, ext2fs_group_of_ino(fs, ino));
	errcode_t err;

	if (c->nr_new == c->cap_new) {
		size_t cap = c->cap_new ? c->cap_new * 2 : 16;
		struct e4_newblk *nb = realloc(c->newblk, cap * sizeof(*nb));

		if (!nb)
			return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
		c->newblk = nb;
		c->cap_new = cap;
	}
	err = ext2fs_new_block2(fs, goal, NULL, blk);
	if (err == EXT2_ET_BLOCK_ALLOC_FAIL)
		return e4_refuse_ino(c, ino, ENOSPC,
				     "no free block for the EA block its grown %s value needs",
				     e4_moved_names(m));
	if (err)
		return e4_fail(c, err, "allocating an EA block");
	ext2fs_mark_block_bitmap2(fs->block_map, *blk);
	c->newblk[c->nr_new++] = (struct e4_newblk){ *blk, from, refs, m };
	return 0;
}

/* New blocks for inodes moving the same entries, shared as far as the kernel shares. */
static int spread(struct e4_ctx *c, struct e4_spill **sp, size_t n, blk64_t from)
{
	for (size_t i = 0; i < n; i += REFCOUNT_MAX) {
		size_t k = n - i < REFCOUNT_MAX ? n - i : REFCOUNT_MAX;
		blk64_t blk;
		int err = new_block(c, sp[i]->ino, from, (uint32_t)k, &sp[i]->m, &blk);

		if (err)
			return err;
		for (size_t j = i; j < i + k; j++)
			sp[j]->to = blk;
	}
	return 0;
}

/* The end of the run of spills from sp[a] that move the same entries. */
static size_t same_end(struct e4_spill **sp, size_t a, size_t n)
{
	size_t b = a + 1;

	while (b < n && e4_moved_same(&sp[a]->m, &sp[b]->m))
		b++;
	return b;
}

/* Inodes without an EA block: one new block per set of entries. */
static int plan_fresh(struct e4_ctx *c, struct e4_spill **sp, size_t n,
		      unsigned char *buf)
{
	for (size_t a = 0, b; a < n; a = b) {
		int err;

		b = same_end(sp, a, n);
		e4_xattr_block_init(buf, c->bsz);
		if (!fits(c, buf, &sp[a]->m))
			return e4_refuse_ino(c, sp[a]->ino, ENOSPC,
					     "its grown %s value does not fit in an EA block",
					     e4_moved_names(&sp[a]->m));
		err = spread(c, sp + a, b - a, 0);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Inodes using one EA block.  When all of its users move the same
 * entries, the block takes them in place and stays shared; otherwise
 * the kernel would copy it on write: those that move get a copy with
 * their entries, shared among them, and the block counts them out.
 */
static int plan_from(struct e4_ctx *c, struct e4_spill **sp, size_t n,
		     unsigned char *buf, unsigned char *tmp)
{
	blk64_t from = sp[0]->from;
	struct e4_ea *e = ea_lookup(c, from);
	size_t keep = n, b;
	uint32_t refs;
	bool ok;
	int err;

	if (e->blk != from)
		return si_error(c->h, EIO, "%s: EA block %llu was not planned", c->name,
				(unsigned long long)from);
	err = ea_base(c, e, buf);
	if (err)
		return err;
	refs = get32(buf + 4);
	/* When every user moves, the largest set keeps the block. */
	if (n == e->nref)
		for (size_t a = 0, most = 0; a < n; a = b) {
			b = same_end(sp, a, n);
			if (b - a > most) {
				most = b - a;
				keep = a;
			}
		}
	if (!e->edit && !(e->edit = calloc(1, sizeof(*e->edit))))
		return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
	for (size_t a = 0; a < n; a = b) {
		b = same_end(sp, a, n);
		memcpy(tmp, buf, c->bsz);
		ok = fits(c, tmp, &sp[a]->m);
		if (!ok && refs > 1)
			return e4_refuse_ino(c, sp[a]->ino, ENOSPC,
					     "the inode has no room for its grown %s value, and its EA block %llu, shared by %u inodes, has none either (nor would a copy of it)",
					     e4_moved_names(&sp[a]->m), (unsigned long long)from, refs);
		if (!ok)
			return e4_refuse_ino(c, sp[a]->ino, ENOSPC,
					     "the grown %s value fits neither in the inode nor in its EA block %llu",
					     e4_moved_names(&sp[a]->m), (unsigned long long)from);
		if (a == keep) {
			e->edit->add = &sp[a]->m;
			for (size_t j = a; j < b; j++)
				sp[j]->to = from;
			continue;
		}
		err = spread(c, sp + a, b - a, from);
		if (err)
			return err;
		e->edit->drop += (uint32_t)(b - a);
	}
	if (e->edit->drop && e->edit->drop >= refs)
		return e4_refuse_ino(c, sp[0]->ino, EUCLEAN,
				     "its EA block %llu counts %u users, but %u inodes use it (run e2fsck)",
				     (unsigned long long)from, refs, e->nref);
	return 0;
}

static int spill_cmp(const void *pa, const void *pb)
{
	const struct e4_spill *x = *(const struct e4_spill *const *)pa;
	const struct e4_spill *y = *(const struct e4_spill *const *)pb;
	int r;

	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	if (x->m.len != y->m.len)
		return x->m.len < y->m.len ? -1 : 1;
	r = memcmp(x->m.buf, y->m.buf, x->m.len);
	if (r)
		return r;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/*
 * Decides, before anything is written, the EA block each spilling
 * inode ends up with, grouped by the block it has and what it moves.
 */
int e4_plan_spills(struct e4_ctx *c)
{
	size_t n = c->nr_spill;
	struct e4_spill **sp;
	unsigned char *buf;
	int err = 0;

	if (!n)
		return 0;
	if (!c->sh->have_bbitmap && (err = build_meta(c)))
		return err;
	sp = malloc(n * sizeof(*sp));
	buf = malloc(2 * (size_t)c->bsz);
	if (!sp || !buf) {
		err = si_error(c->h, ENOMEM, "%s: out of memory", c->name);
		goto out_free;
	}
	for (size_t i = 0; i < n; i++)
		sp[i] = &c->spill[i];
	qsort(sp, n, sizeof(*sp), spill_cmp);
	for (size_t a = 0, b; !err && a < n; a = b) {
		for (b = a + 1; b < n && sp[b]->from == sp[a]->from; b++)
			;
		err = sp[a]->from ? plan_from(c, sp + a, b - a, buf, buf + c->bsz) :
				    plan_fresh(c, sp + a, b - a, buf);
	}
out_free:
	free(buf);
	free(sp);
	return err;
}

/* ---- writing ---- */

/* The final contents of a known EA block: shifted, then edited as planned. */
static int ea_final(struct e4_ctx *c, const struct e4_ea *e, unsigned char *buf)
{
	int err = ea_base(c, e, buf);

	if (err || !e->edit)
		return err;
	if (e->edit->add && !fits(c, buf, e->edit->add))
		return si_error(c->h, EIO, "%s: EA block %llu: planned entries do not fit",
				c->name, (unsigned long long)e->blk);
	put32(buf + 4, get32(buf + 4) - e->edit->drop);
	e4_xattr_block_seal(c, e->blk, buf, false);
	return 0;
}

int e4_write_ea(struct e4_ctx *c, unsigned char *tmp)
{
	int err = 0;

	for (size_t i = 0; !err && i < c->sh->ea_cap; i++) {
		struct e4_ea *e = &c->sh->ea[i];

		if (!e->blk || (!(e->res & SI_CHANGED) && !e->edit))
			continue;
		if (e->buf && !e->edit) {
			err = e4_write_blocks(c, e->blk, 1, e->buf);
			continue;
		}
		err = ea_final(c, e, tmp);
		if (!err)
			err = e4_write_blocks(c, e->blk, 1, tmp);
	}
	return err;
}

/*
 * The blocks allocated for spilled entries: the entries alone, or a
 * copy of the shared block they leave with the entries added.  Their
 * allocation reaches the bitmaps, group descriptors and superblock
 * libext2fs writes when the image is closed.
 */
int e4_write_new(struct e4_ctx *c, unsigned char *buf)
{
	for (size_t i = 0; i < c->nr_new; i++) {
		const struct e4_newblk *nb = &c->newblk[i];
		int err = 0;

		if (nb->from)
			err = ea_base(c, ea_lookup(c, nb->from), buf);
		else
			e4_xattr_block_init(buf, c->bsz);
		if (!err && !fits(c, buf, nb->m))
			err = si_error(c->h, EIO, "%s: EA block %llu: planned entries do not fit",
				       c->name, (unsigned long long)nb->blk);
		if (err)
			return err;
		put32(buf + 4, nb->refs);
		e4_xattr_block_seal(c, nb->blk, buf, true);
		ext2fs_block_alloc_stats2(c->fs, nb->blk, +1);
		err = e4_write_blocks(c, nb->blk, 1, buf);
		if (err)
			return err;
	}
	return 0;
}
