// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The ext2/3/4 image backend, through libext2fs, without mounting.
 *
 * A run has two phases.  Planning reads the used part of every inode
 * table in large sequential runs, checks each in-use inode's checksum,
 * and computes the shifted inodes and EA blocks, noting which runs
 * change and keeping shifted EA blocks in memory within a budget (on a
 * large image, two threads each take half of the runs); nothing is
 * written, so every refusal (a bad checksum, a value that no longer
 * fits, --unmapped=fail) leaves the image as it was.  Writing
 * then reads and shifts each changed run again, from the page cache,
 * and puts it back in place (EA blocks likewise, those not kept
 * recomputed), then rewrites the quota files.  The check pass is
 * planning alone.
 *
 * The image is found, checked and opened in ext4-open.c, and EA blocks
 * are tracked, given spilled values and written in ext4-eablock.c; xattr
 * areas are shifted in ext4-xattr.c and quota files in ext4-quota.c.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <et/com_err.h>
#include <pthread.h>
#include <stdatomic.h>

#include "ext4.h"
#include "journal.h"
#include "le.h"

/*
 * Bytes of inode table per read: a run stays in the CPU's cache from
 * the read's copy to the shift (and to the journal's copy of it); 8 MiB
 * runs were a cache miss per inode, twice.
 */
#define RUN_MAX		(1u << 20)
#define BUDGET_MAX	((size_t)1 << 30)

/* Inode field offsets (struct ext2_inode_large, little endian). */
#define I_UID		2
#define I_GID		24
#define I_LINKS		26
#define I_BLOCKS	28
#define I_FLAGS		32
#define I_GENERATION	100
#define I_FILE_ACL	104
#define I_BLOCKS_HIGH	116
#define I_FILE_ACL_HIGH	118
#define I_UID_HIGH	120
#define I_GID_HIGH	122
#define I_CSUM_LO	124
#define I_EXTRA_ISIZE	128
#define I_CSUM_HI	130
#define I_PROJID	156
#define XA_MAGIC	0xEA020000u

/* ---- errors and the write path ---- */

int e4_fail(struct e4_ctx *c, errcode_t err, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	/* libext2fs returns errnos as they are and its own codes above them. */
	return si_error(c->h, err > 0 && err < 4096 ? (int)err : EIO,
			"%s: %s: %s", c->name, what, error_message(err));
}

/*
 * Every in-place write of the backend goes through here: runs of
 * inode-table blocks and single EA blocks.  The image is open through
 * the journal's io_manager (journal-io.c), which journals every write
 * below libext2fs, these as well as the bitmaps, quota files and
 * superblocks the library writes, with the old bytes it kept from the
 * read of the same run: nothing is read back here.
 */
int e4_write_blocks(struct e4_ctx *c, blk64_t blk, unsigned int count,
		    const void *buf)
{
	errcode_t err;

	err = io_channel_write_blk64(c->fs->io, blk, (int)count, buf);
	if (err)
		return e4_fail(c, err, "writing blocks %llu-%llu",
			       (unsigned long long)blk,
			       (unsigned long long)(blk + count - 1));
	c->writes += count;
	return 0;
}

/* ---- crc32c: the inode checksum is on the hot path ---- */

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc32c_hw(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c64 = crc;

	for (; len >= 8; p += 8, len -= 8) {
		uint64_t v;

		memcpy(&v, p, sizeof(v));
		c64 = __builtin_ia32_crc32di(c64, v);
	}
	crc = (uint32_t)c64;
	for (; len; p++, len--)
		crc = __builtin_ia32_crc32qi(crc, *p);
	return crc;
}
#endif

/* The same function as ext2fs_crc32c_le(), with the CPU's instruction. */
uint32_t e4_crc32c(uint32_t crc, const void *p, size_t len)
{
#if defined(__x86_64__)
	static int hw = -1;

	if (hw < 0)
		hw = __builtin_cpu_supports("sse4.2");
	if (hw)
		return crc32c_hw(crc, p, len);
#endif
	return ext2fs_crc32c_le(crc, p, len);
}

/*
 * The metadata_csum inode checksum: crc32c over the inode number, the
 * generation and the inode with its checksum fields zeroed.  A single
 * crc32c chain waits on each instruction's latency, so inodes are
 * checksummed four at a time in independent chains.
 */
#define CSUM_LANES 4

struct csum_batch {
	unsigned int n;
	ext2_ino_t ino[CSUM_LANES];
	unsigned char *raw[CSUM_LANES];
};

static bool inode_has_csum_hi(const struct e4_ctx *c, const unsigned char *raw)
{
	return c->isz > I_EXTRA_ISIZE &&
	       get16(raw + I_EXTRA_ISIZE) >= EXT4_INODE_CSUM_HI_EXTRA_END;
}

static uint64_t load64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;	/* crc32c consumes the bytes in memory order */
}

#if defined(__x86_64__)
/*
 * Advances every lane over bytes [off, off + len) of its inode.  The
 * four chains are named, so that they stay in registers: through the
 * arrays, each step went through memory (the compiler cannot tell crc
 * from raw) and the chains no longer overlapped.
 */
_Static_assert(CSUM_LANES == 4, "lanes_hw() has four chains");
__attribute__((target("sse4.2")))
static void lanes_hw(uint64_t crc[CSUM_LANES], unsigned char *const raw[CSUM_LANES],
		     size_t off, size_t len)
{
	const unsigned char *p0 = raw[0] + off, *p1 = raw[1] + off;
	const unsigned char *p2 = raw[2] + off, *p3 = raw[3] + off;
	uint64_t c0 = crc[0], c1 = crc[1], c2 = crc[2], c3 = crc[3];
	size_t i = 0;

	for (; len - i >= 8; i += 8) {
		c0 = __builtin_ia32_crc32di(c0, load64(p0 + i));
		c1 = __builtin_ia32_crc32di(c1, load64(p1 + i));
		c2 = __builtin_ia32_crc32di(c2, load64(p2 + i));
		c3 = __builtin_ia32_crc32di(c3, load64(p3 + i));
	}
	for (; i < len; i++) {
		c0 = __builtin_ia32_crc32qi((uint32_t)c0, p0[i]);
		c1 = __builtin_ia32_crc32qi((uint32_t)c1, p1[i]);
		c2 = __builtin_ia32_crc32qi((uint32_t)c2, p2[i]);
		c3 = __builtin_ia32_crc32qi((uint32_t)c3, p3[i]);
	}
	crc[0] = c0;
	crc[1] = c1;
	crc[2] = c2;
	crc[3] = c3;
}

__attribute__((target("sse4.2")))
static uint64_t step16_hw(uint64_t crc, uint16_t v)
{
	return __builtin_ia32_crc32hi((uint32_t)crc, v);
}
#endif

static bool have_hw(void)
{
#if defined(__x86_64__)
	static int hw = -1;

	if (hw < 0)
		hw = __builtin_cpu_supports("sse4.2");
	return hw;
#else
	return false;
#endif
}

static void lanes(uint64_t crc[CSUM_LANES], unsigned char *const raw[CSUM_LANES],
		  size_t off, size_t len)
{
#if defined(__x86_64__)
	if (have_hw()) {
		lanes_hw(crc, raw, off, len);
		return;
	}
#endif
	for (int l = 0; l < CSUM_LANES; l++)
		crc[l] = ext2fs_crc32c_le((uint32_t)crc[l], raw[l] + off, len);
}

/* Feeds two bytes (in memory order) of value v to one lane. */
static uint64_t step16(uint64_t crc, uint16_t v)
{
#if defined(__x86_64__)
	if (have_hw())
		return step16_hw(crc, v);
#endif
	return ext2fs_crc32c_le((uint32_t)crc, (const unsigned char *)&v, 2);
}

/* The checksums of a batch; lanes past b->n repeat the first inode. */
static void csum_batch(const struct e4_ctx *c, const struct csum_batch *b,
		       uint32_t out[CSUM_LANES])
{
	unsigned char *raw[CSUM_LANES];
	uint64_t crc[CSUM_LANES];
	unsigned int isz = c->isz;

	unsigned char pre[CSUM_LANES][8], *prep[CSUM_LANES];

	for (int l = 0; l < CSUM_LANES; l++) {
		unsigned int i = (unsigned int)l < b->n ? (unsigned int)l : 0;
		uint32_t inum = htole32(b->ino[i]);

		raw[l] = b->raw[i];
		memcpy(pre[l], &inum, 4);
		memcpy(pre[l] + 4, raw[l] + I_GENERATION, 4);
		prep[l] = pre[l];
		crc[l] = c->seed;
	}
	lanes(crc, prep, 0, 8);		/* the inode number and generation first */
	lanes(crc, raw, 0, I_CSUM_LO);
	for (int l = 0; l < CSUM_LANES; l++)
		crc[l] = step16(crc[l], 0);
	if (isz <= I_EXTRA_ISIZE) {
		lanes(crc, raw, I_CSUM_LO + 2, isz - I_CSUM_LO - 2);
	} else {
		lanes(crc, raw, I_CSUM_LO + 2, I_CSUM_HI - I_CSUM_LO - 2);
		for (int l = 0; l < CSUM_LANES; l++) {
			uint16_t v;

			memcpy(&v, raw[l] + I_CSUM_HI, 2);
			crc[l] = step16(crc[l], inode_has_csum_hi(c, raw[l]) ? 0 : v);
		}
		lanes(crc, raw, I_CSUM_HI + 2, isz - I_CSUM_HI - 2);
	}
	for (int l = 0; l < CSUM_LANES; l++)
		out[l] = (uint32_t)crc[l];
}

/* Returns the index of the first inode whose checksum is wrong, or -1. */
static int csum_verify(const struct e4_ctx *c, const struct csum_batch *b)
{
	uint32_t got[CSUM_LANES];

	csum_batch(c, b, got);
	for (unsigned int i = 0; i < b->n; i++) {
		bool hi = inode_has_csum_hi(c, b->raw[i]);
		uint32_t want = get16(b->raw[i] + I_CSUM_LO);

		if (hi)
			want |= (uint32_t)get16(b->raw[i] + I_CSUM_HI) << 16;
		if (want != (hi ? got[i] : got[i] & 0xffff))
			return (int)i;
	}
	return -1;
}

static void csum_set(const struct e4_ctx *c, const struct csum_batch *b)
{
	uint32_t crc[CSUM_LANES];

	csum_batch(c, b, crc);
	for (unsigned int i = 0; i < b->n; i++) {
		put16(b->raw[i] + I_CSUM_LO, (uint16_t)crc[i]);
		if (inode_has_csum_hi(c, b->raw[i]))
			put16(b->raw[i] + I_CSUM_HI, (uint16_t)(crc[i] >> 16));
	}
}

/*
 * The raw crc32c is linear: crc(seed, A ^ D) = crc(seed, A) ^ crc(0, D).
 * When only the owner fields of an inode change and its checksum has all
 * 32 bits (the high half after i_extra_isize), the new checksum is the
 * old one with the changed bytes' contributions folded in, one table
 * look-up per byte instead of a pass over the whole inode.
 */
static const unsigned int owner_bytes[8] = {
	I_UID, I_UID + 1, I_GID, I_GID + 1,
	I_UID_HIGH, I_UID_HIGH + 1, I_GID_HIGH, I_GID_HIGH + 1,
};

static void csum_tables(struct e4_ctx *c)
{
	unsigned char *z = c->scratch;

	memset(z, 0, c->isz);
	for (int k = 0; k < 8; k++) {
		uint32_t bit[8];

		for (int b = 0; b < 8; b++) {
			z[owner_bytes[k]] = (unsigned char)(1u << b);
			bit[b] = e4_crc32c(0, z, c->isz);
		}
		z[owner_bytes[k]] = 0;
		for (unsigned int v = 0; v < 256; v++) {
			uint32_t x = 0;

			for (int b = 0; b < 8; b++)
				if (v & (1u << b))
					x ^= bit[b];
			c->ctab[k][v] = x;
		}
	}
	c->have_ctab = true;
}

static void owner_save(const unsigned char *raw, unsigned char old[8])
{
#pragma GCC unroll 8
	for (int k = 0; k < 8; k++)
		old[k] = raw[owner_bytes[k]];
}

/* The checksum of an inode whose owner bytes alone changed from old. */
static void csum_patch(const struct e4_ctx *c, unsigned char *raw,
		       const unsigned char old[8])
{
	uint32_t crc = get16(raw + I_CSUM_LO) | (uint32_t)get16(raw + I_CSUM_HI) << 16;

#pragma GCC unroll 8
	for (int k = 0; k < 8; k++)
		crc ^= c->ctab[k][old[k] ^ raw[owner_bytes[k]]];
	put16(raw + I_CSUM_LO, (uint16_t)crc);
	put16(raw + I_CSUM_HI, (uint16_t)(crc >> 16));
}

/* ---- which inodes ---- */

static bool is_special(const struct e4_ctx *c, ext2_ino_t ino)
{
	const struct ext2_super_block *sb = c->fs->super;

	if (ino < EXT2_FIRST_INODE(sb))
		return ino != EXT2_ROOT_INO;
	return ino == sb->s_journal_inum || ino == sb->s_usr_quota_inum ||
	       ino == sb->s_grp_quota_inum || ino == sb->s_prj_quota_inum ||
	       ino == sb->s_orphan_file_inum;
}

static bool ino_used(const struct e4_ctx *c, ext2_ino_t ino)
{
	return c->ibits[(ino - 1) / 8] & (1u << ((ino - 1) % 8));
}

/* ---- naming an inode in a refusal ---- */

struct parent_find {
	ext2_ino_t ino;
	ext2_ino_t dir;			/* 0 until an entry for ino is met */
};

static int parent_cb(ext2_ino_t dir, int entry, struct ext2_dir_entry *de,
		     int offset, int blocksize, char *buf, void *priv)
{
	struct parent_find *p = priv;

	(void)offset, (void)blocksize, (void)buf;
	if (entry == DIRENT_DOT_FILE || entry == DIRENT_DOT_DOT_FILE ||
	    de->inode != p->ino)
		return 0;
	p->dir = dir;
	return DIRENT_ABORT;
}

/* The directory holding an entry for ino: a scan of every directory. */
static ext2_ino_t find_parent(struct e4_ctx *c, ext2_ino_t ino)
{
	struct parent_find p = { .ino = ino };
	ext2_inode_scan scan;
	struct ext2_inode inode;
	ext2_ino_t dir;

	if (ext2fs_open_inode_scan(c->fs, 0, &scan))
		return 0;
	ext2fs_inode_scan_flags(scan, EXT2_SF_SKIP_MISSING_ITABLE, 0);
	while (!p.dir) {
		errcode_t err = ext2fs_get_next_inode(scan, &dir, &inode);

		if (err == EXT2_ET_INODE_CSUM_INVALID || err == EXT2_ET_INODE_IS_GARBAGE)
			continue;
		if (err || !dir)
			break;
		if (!LINUX_S_ISDIR(inode.i_mode) || !inode.i_links_count ||
		    !ino_used(c, dir))
			continue;
		ext2fs_dir_iterate2(c->fs, dir, 0, NULL, parent_cb, &p);
	}
	ext2fs_close_inode_scan(scan);
	return p.dir;
}

/*
 * Names an inode by a path for a refusal (the first link found), or by
 * number when no directory leads to it.  Only for errors: it reads
 * every directory.
 */
const char *e4_path(struct e4_ctx *c, ext2_ino_t ino, char *buf, size_t size)
{
	struct ext2_inode inode;
	ext2_ino_t dir = 0;
	char *name = NULL;

	snprintf(buf, size, "<inode %u>", ino);
	pthread_mutex_lock(&c->sh->lock);
	if (ext2fs_read_inode(c->fs, ino, &inode) ||
	    (!LINUX_S_ISDIR(inode.i_mode) && !(dir = find_parent(c, ino))))
		goto out_unlock;
	if (ext2fs_get_pathname(c->fs, LINUX_S_ISDIR(inode.i_mode) ? ino : dir,
				LINUX_S_ISDIR(inode.i_mode) ? 0 : ino, &name) || !name)
		goto out_unlock;
	snprintf(buf, size, "%s (inode %u)", name, ino);
	ext2fs_free_mem(&name);
out_unlock:
	pthread_mutex_unlock(&c->sh->lock);
	return buf;
}

/* A run of inode-table blocks read, shifted and written together. */
struct e4_run {
	blk64_t blk;
	unsigned int nblk;
	ext2_ino_t ino;			/* the first inode in it */
	bool dirty;
};

struct e4_runs {
	struct e4_run *r;
	size_t nr, cap;
	uint64_t inodes;		/* in-use inodes, for progress */
};

static int add_run(struct e4_ctx *c, struct e4_runs *rs, blk64_t blk,
		   unsigned int nblk, ext2_ino_t ino)
{
	unsigned int ipb = c->bsz / c->isz;
	struct e4_run *last = rs->nr ? &rs->r[rs->nr - 1] : NULL;

	/* flex_bg lays tables end to end: read consecutive full ones together. */
	if (last && last->blk + last->nblk == blk &&
	    last->ino + last->nblk * ipb == ino &&
	    (uint64_t)(last->nblk + nblk) * c->bsz <= RUN_MAX) {
		last->nblk += nblk;
		return 0;
	}
	if (rs->nr == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 64;
		struct e4_run *r = realloc(rs->r, cap * sizeof(*r));

		if (!r)
			return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
		rs->r = r;
		rs->cap = cap;
	}
	rs->r[rs->nr++] = (struct e4_run){ .blk = blk, .nblk = nblk, .ino = ino };
	return 0;
}

/* The used part of each group's table, split into runs of at most RUN_MAX. */
static int group_runs(struct e4_ctx *c, struct e4_runs *rs, dgrp_t g)
{
	ext2_filsys fs = c->fs;
	unsigned int ipg = fs->super->s_inodes_per_group, ipb = c->bsz / c->isz;
	unsigned int chunk = RUN_MAX / c->bsz, used = 0, i, nblk, done;
	ext2_ino_t first = g * ipg + 1;
	const unsigned char *bits;
	blk64_t table = ext2fs_inode_table_loc(fs, g);

	if (ext2fs_has_group_desc_csum(fs) &&
	    (ext2fs_bg_flags(fs, g) & EXT2_BG_INODE_UNINIT))
		return 0;
	/* The last in-use inode bounds the read, whatever itable_unused says. */
	bits = c->ibits + (size_t)g * ipg / 8;
	for (i = ipg; i > 0; i--)
		if (bits[(i - 1) / 8] & (1u << ((i - 1) % 8))) {
			used = i;
			break;
		}
	for (i = 0; i < used; i++)
		rs->inodes += (bits[i / 8] >> (i % 8)) & 1;
	nblk = (used + ipb - 1) / ipb;
	for (done = 0; done < nblk; done += chunk) {
		unsigned int n = nblk - done < chunk ? nblk - done : chunk;
		int err = add_run(c, rs, table + done, n, first + done * ipb);

		if (err)
			return err;
	}
	return 0;
}

static int read_ibitmap(struct e4_ctx *c)
{
	ext2_filsys fs = c->fs;
	uint64_t count = (uint64_t)fs->group_desc_count * fs->super->s_inodes_per_group;
	errcode_t err;

	err = ext2fs_read_inode_bitmap(fs);
	if (err)
		return e4_fail(c, err, "reading the inode bitmaps");
	c->ibits = calloc(1, count / 8 + 1);
	if (!c->ibits)
		return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		uint32_t ipg = fs->super->s_inodes_per_group;

		/* Groups hold a multiple of 8 inodes, so they start on a byte. */
		err = ext2fs_get_inode_bitmap_range2(fs->inode_map, (uint64_t)g * ipg + 1,
						     ipg, c->ibits + (size_t)g * ipg / 8);
		if (err)
			return e4_fail(c, err, "reading the inode bitmap of group %u", g);
	}
	return 0;
}

static int plan_runs(struct e4_ctx *c, struct e4_runs *rs)
{
	int err = read_ibitmap(c);

	for (dgrp_t g = 0; !err && g < c->fs->group_desc_count; g++)
		err = group_runs(c, rs, g);
	return err;
}

/* ---- inodes ---- */

static uint32_t get_id(const unsigned char *raw, unsigned int lo, unsigned int hi)
{
	return get16(raw + lo) | (uint32_t)get16(raw + hi) << 16;
}

static void put_id(unsigned char *raw, unsigned int lo, unsigned int hi, uint32_t id)
{
	put16(raw + lo, (uint16_t)id);
	put16(raw + hi, (uint16_t)(id >> 16));
}

/*
 * si_shift_id(), remembered for the ids the map covers (an image holds
 * few owners, met once per inode and pass); an unmapped id is looked up
 * every time, so that the tally counts it.
 */
static __attribute__((noinline)) int shift_id_lookup(struct e4_ctx *c, enum si_kind k,
						     uint32_t id, uint32_t *out)
{
	int res = si_shift_id(&c->h->rules, k, id, out, c->replay ? NULL : &c->h->tally);

	if (!(res & SI_UNMAPPED))
		c->idc[k][id % E4_IDC] = (struct e4_idc){
			.id = id, .to = *out, .res = res, .valid = true,
		};
	return res;
}

static inline int shift_id(struct e4_ctx *c, enum si_kind k, uint32_t id, uint32_t *out)
{
	const struct e4_idc *m = &c->idc[k][id % E4_IDC];

	if (m->valid && m->id == id) {
		*out = m->to;
		return m->res;
	}
	return shift_id_lookup(c, k, id, out);
}

static int shift_owner(struct e4_ctx *c, unsigned char *raw)
{
	uint32_t uid = get_id(raw, I_UID, I_UID_HIGH);
	uint32_t gid = get_id(raw, I_GID, I_GID_HIGH);
	uint32_t nuid, ngid;
	int res;

	res = shift_id(c, SI_KUID, uid, &nuid);
	res |= shift_id(c, SI_KGID, gid, &ngid);
	if (res & SI_CHANGED) {
		put_id(raw, I_UID, I_UID_HIGH, nuid);
		put_id(raw, I_GID, I_GID_HIGH, ngid);
	}
	return res;
}

/* The xattrs in the inode body, after i_extra_isize. */
static int shift_ibody(struct e4_ctx *c, ext2_ino_t ino, unsigned char *raw)
{
	unsigned int extra;
	unsigned char *hdr;

	if (c->isz <= EXT2_GOOD_OLD_INODE_SIZE)
		return 0;
	extra = get16(raw + I_EXTRA_ISIZE);
	if (extra & 3 || extra > c->isz - EXT2_GOOD_OLD_INODE_SIZE)
		return si_error(c->h, EUCLEAN,
				"%s: inode %u: i_extra_isize %u is invalid; nothing was changed",
				c->name, ino, extra);
	hdr = raw + EXT2_GOOD_OLD_INODE_SIZE + extra;
	if (c->isz - EXT2_GOOD_OLD_INODE_SIZE - extra < 8 || get32(hdr) != XA_MAGIC)
		return 0;
	return e4_xattr_area(c, ino, 0, E4_AREA_INODE, hdr + 4, hdr + 4, raw + c->isz,
			     &c->out);
}

/* ---- values that outgrow their place ---- */

/* A refusal naming the inode by its path (read only for the message). */
int e4_refuse_ino(struct e4_ctx *c, ext2_ino_t ino, int err, const char *fmt, ...)
{
	char path[4096], what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	e4_path(c, ino, path, sizeof(path));
	return si_error(c->h, err, "%s: %s: %s; nothing was changed", c->name, path, what);
}

/*
 * The inode body's xattr area, set up empty if the inode has none yet
 * (the kernel's i_extra_isize leaves it room); false if it has no room.
 */
static bool ibody_area(const struct e4_ctx *c, unsigned char *raw,
		       unsigned char **base, unsigned char **end)
{
	unsigned int extra;
	unsigned char *hdr;

	if (c->isz <= EXT2_GOOD_OLD_INODE_SIZE)
		return false;
	extra = get16(raw + I_EXTRA_ISIZE);
	if (!extra || c->isz - EXT2_GOOD_OLD_INODE_SIZE - extra < 8)
		return false;
	hdr = raw + EXT2_GOOD_OLD_INODE_SIZE + extra;
	if (get32(hdr) != XA_MAGIC) {
		memset(hdr, 0, (size_t)(raw + c->isz - hdr));
		put32(hdr, XA_MAGIC);
	}
	*base = hdr + 4;
	*end = raw + c->isz;
	return true;
}

/* Moves the values that outgrew an unshared EA block into the inode body. */
static int pull_into_body(struct e4_ctx *c, ext2_ino_t ino, unsigned char *raw,
			  const struct e4_edit *ed)
{
	unsigned char *save = c->scratch, *base, *end;

	memcpy(save, raw, c->isz);
	if (ibody_area(c, raw, &base, &end) &&
	    !e4_xattr_insert(E4_AREA_INODE, base, base, end, &ed->pulled))
		return 0;
	memcpy(raw, save, c->isz);
	return e4_refuse_ino(c, ino, ENOSPC,
			     "the grown %s value fits neither in its full EA block nor in the inode",
			     e4_moved_names(&ed->pulled));
}

/* Planning: notes an inode whose grown values leave its body. */
static int spill_record(struct e4_ctx *c, ext2_ino_t ino, const unsigned char *raw,
			blk64_t from)
{
	struct e4_spill *s;

	if (c->nr_spill == c->cap_spill) {
		size_t cap = c->cap_spill ? c->cap_spill * 2 : 64;

		s = realloc(c->spill, cap * sizeof(*s));
		if (!s)
			return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
		c->spill = s;
		c->cap_spill = cap;
	}
	s = &c->spill[c->nr_spill];
	*s = (struct e4_spill){
		.ino = ino, .from = from,
		.id = { get_id(raw, I_UID, I_UID_HIGH), get_id(raw, I_GID, I_GID_HIGH) },
	};
	if (c->isz >= I_PROJID + 4 &&
	    get16(raw + I_EXTRA_ISIZE) >= I_PROJID + 4 - EXT2_GOOD_OLD_INODE_SIZE)
		s->id[2] = get32(raw + I_PROJID);
	if (e4_moved_copy(c, &s->m, &c->out) < 0)
		return -ENOMEM;
	c->nr_spill++;
	return 0;
}

static const struct e4_spill *spill_find(const struct e4_ctx *c, ext2_ino_t ino)
{
	size_t lo = 0, hi = c->nr_spill;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (c->spill[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->nr_spill && c->spill[lo].ino == ino ? &c->spill[lo] : NULL;
}

/* Adds one cluster to i_blocks, in the unit the inode counts in. */
static void iblocks_add_cluster(const struct e4_ctx *c, unsigned char *raw)
{
	ext2_filsys fs = c->fs;
	bool huge = ext2fs_has_feature_huge_file(fs->super);
	uint64_t n = get32(raw + I_BLOCKS);

	if (huge)
		n |= (uint64_t)get16(raw + I_BLOCKS_HIGH) << 32;
	n += (uint64_t)EXT2FS_CLUSTER_RATIO(fs) *
	     (huge && (get32(raw + I_FLAGS) & EXT4_HUGE_FILE_FL) ? 1 : c->bsz / 512);
	put32(raw + I_BLOCKS, (uint32_t)n);
	if (huge)
		put16(raw + I_BLOCKS_HIGH, (uint16_t)(n >> 32));
}

/* Writing: points a spilling inode at the EA block planned for it. */
static int spill_apply(struct e4_ctx *c, ext2_ino_t ino, unsigned char *raw)
{
	const struct e4_spill *s = spill_find(c, ino);

	if (!s)
		return si_error(c->h, EIO, "%s: inode %u: spill not planned", c->name, ino);
	put32(raw + I_FILE_ACL, (uint32_t)s->to);
	if (ext2fs_has_feature_64bit(c->fs->super))
		put16(raw + I_FILE_ACL_HIGH, (uint16_t)(s->to >> 32));
	if (!s->from)
		iblocks_add_cluster(c, raw);
	return 0;
}

/* Grown values left the inode body (body) or its EA block (ea). */
static int move_entries(struct e4_ctx *c, ext2_ino_t ino, unsigned char *raw,
			blk64_t blk, int body, int ea)
{
	if ((body & E4_MOVED) && (ea & E4_MOVED))
		return e4_refuse_ino(c, ino, ENOSPC,
				     "grown security.capability or override_stat values fit neither in the inode nor in its EA block");
	if (ea & E4_MOVED)
		return pull_into_body(c, ino, raw, e4_ea_edit(c, blk));
	return c->replay ? spill_apply(c, ino, raw) : spill_record(c, ino, raw, blk);
}

/* Inodes are named by number: the scan never reads directories. */
static void report(struct e4_ctx *c, ext2_ino_t ino, int own, int body, int blk)
{
	char path[32], what[64] = "";

	snprintf(path, sizeof(path), "<inode %u>", ino);
	if (c->listing && (own | body | blk) & SI_CHANGED) {
		if (own & SI_CHANGED)
			strcat(what, ",owner");
		if (body & SI_CHANGED)
			strcat(what, ",xattrs");
		if (blk & SI_CHANGED)
			strcat(what, ",ea-block");
		si_list(c->h, path, what + 1);
	}
	si_tally_object(&c->h->tally, path);
}

/* The privilege rule: this inode would grant real root after the shift. */
static void privileged(struct e4_ctx *c, ext2_ino_t ino)
{
	char path[32];

	snprintf(path, sizeof(path), "<inode %u>", ino);
	si_tally_privileged(&c->h->tally, path);
}

/* Is the inode one the shift is for? */
static bool ino_wanted(const struct e4_ctx *c, ext2_ino_t ino, const unsigned char *raw)
{
	return ino_used(c, ino) && get16(raw + I_LINKS) && !is_special(c, ino) &&
	       !(get32(raw + I_FLAGS) & EXT4_EA_INODE_FL);
}

/*
 * Shifts one wanted inode in its table buffer.  Returns SI_CHANGED when
 * the inode's bytes changed (the caller sets its checksum again), with
 * BODY_CHANGED when more than the owner did.
 */
#define BODY_CHANGED	(1 << 9)

static int shift_inode(struct e4_ctx *c, ext2_ino_t ino, unsigned char *raw)
{
	struct shiftimg_stats *st = &c->h->tally.st;
	uint16_t links = get16(raw + I_LINKS);
	uint32_t uid = get_id(raw, I_UID, I_UID_HIGH);
	uint32_t gid = get_id(raw, I_GID, I_GID_HIGH);
	blk64_t blk;
	int own, body, ea = 0;

	own = shift_owner(c, raw);
	c->out.len = c->out.nr = 0;
	body = shift_ibody(c, ino, raw);
	if (body < 0)
		return body;
	blk = get32(raw + I_FILE_ACL);
	if (ext2fs_has_feature_64bit(c->fs->super))
		blk |= (blk64_t)get16(raw + I_FILE_ACL_HIGH) << 32;
	if (blk) {
		ea = e4_ea_visit(c, ino, blk);
		if (ea < 0)
			return ea;
	}
	if ((body | ea) & E4_MOVED) {
		int err = move_entries(c, ino, raw, blk, body, ea);

		if (err < 0)
			return err;
		body |= SI_CHANGED;
	}
	if (!c->replay) {
		st->objects++;
		if ((own | body | ea) & SI_CHANGED)
			st->changed++;
		if (!LINUX_S_ISDIR(get16(raw)) && links > 1)
			st->hardlinks += links - 1u;
		if (c->listing || c->h->tally.pending)
			report(c, ino, own, body, ea);
		if (((body | ea) & E4_PRIV_CAP) ||
		    si_grants_root(get16(raw), uid, gid,
				   get_id(raw, I_UID, I_UID_HIGH),
				   get_id(raw, I_GID, I_GID_HIGH)))
			privileged(c, ino);
	}
	return ((own | body) & SI_CHANGED) | (body & SI_CHANGED ? BODY_CHANGED : 0);
}

static int flush_verify(struct e4_ctx *c, struct csum_batch *b)
{
	int bad = c->csum && b->n ? csum_verify(c, b) : -1;

	if (bad >= 0)
		return si_error(c->h, EUCLEAN,
				"%s: inode %u: checksum does not match; nothing was changed (run e2fsck)",
				c->name, b->ino[bad]);
	b->n = 0;
	return 0;
}

static void add_lane(struct csum_batch *b, ext2_ino_t ino, unsigned char *raw)
{
	b->ino[b->n] = ino;
	b->raw[b->n++] = raw;
}

/*
 * Shifts a slice of at most SLICE inodes.  Planning checks the
 * checksums first (so a bad one refuses before anything is counted),
 * then shifts; its buffer is not written, so it sets no checksum.  The
 * replay before writing shifts the same verified bytes again and sets
 * the checksums of the inodes that changed.
 */
#define SLICE 64

static int verify_slice(struct e4_ctx *c, ext2_ino_t first, unsigned int n,
			unsigned char *buf, unsigned int *want)
{
	struct csum_batch b = { 0 };
	unsigned int nw = 0;
	int err;

	for (unsigned int i = 0; i < n; i++) {
		unsigned char *raw = buf + (size_t)i * c->isz;

		if (!ino_wanted(c, first + i, raw))
			continue;
		want[nw++] = i;
		if (!c->csum || c->replay)
			continue;
		add_lane(&b, first + i, raw);
		if (b.n == CSUM_LANES && (err = flush_verify(c, &b)))
			return err;
	}
	if ((err = flush_verify(c, &b)))
		return err;
	return (int)nw;
}

static int shift_slice(struct e4_ctx *c, ext2_ino_t first, unsigned int n,
		       unsigned char *buf)
{
	unsigned int want[SLICE];
	struct csum_batch b = { 0 };
	bool set = c->csum && c->replay;
	int nw, res = 0;

	nw = verify_slice(c, first, n, buf, want);
	if (nw < 0)
		return nw;
	for (int k = 0; k < nw; k++) {
		unsigned char *raw = buf + (size_t)want[k] * c->isz;
		unsigned char old[8];
		int x;

		owner_save(raw, old);
		x = shift_inode(c, first + want[k], raw);
		if (x < 0)
			return x;
		res |= x & SI_CHANGED;
		if (!set || !(x & SI_CHANGED))
			continue;
		if (!(x & BODY_CHANGED) && c->have_ctab && inode_has_csum_hi(c, raw)) {
			csum_patch(c, raw, old);
			continue;
		}
		add_lane(&b, first + want[k], raw);
		if (b.n == CSUM_LANES) {
			csum_set(c, &b);
			b.n = 0;
		}
	}
	if (b.n)
		csum_set(c, &b);
	return res;
}

static int shift_run(struct e4_ctx *c, struct e4_run *r, unsigned char *buf)
{
	uint64_t n = (uint64_t)r->nblk * (c->bsz / c->isz);
	uint64_t last = c->fs->super->s_inodes_count;
	int res = 0;

	if (r->ino + n - 1 > last)
		n = last >= r->ino ? last - r->ino + 1 : 0;
	for (uint64_t i = 0; i < n; i += SLICE) {
		unsigned int k = n - i < SLICE ? (unsigned int)(n - i) : SLICE;
		int x = shift_slice(c, r->ino + (ext2_ino_t)i, k, buf + i * c->isz);

		if (x < 0)
			return x;
		res |= x;
	}
	return res;
}

/* Scratch for xattr areas (e4_ctx.scratch), one per planning thread. */
static unsigned char *scratch_new(const struct e4_ctx *c)
{
	return malloc(4 * (c->bsz > c->isz ? c->bsz : c->isz) + 4096);
}

/* What each planning thread has of its own: buffers and spills. */
static void thread_free(struct e4_ctx *c)
{
	for (size_t i = 0; i < c->nr_spill; i++)
		e4_moved_free(&c->spill[i].m);
	free(c->spill);
	e4_moved_free(&c->out);
	e4_moved_free(&c->pull);
	free(c->run);
	free(c->scratch);
}

static int run_failed(struct e4_ctx *c, const struct e4_run *r, errcode_t err)
{
	return e4_fail(c, err, "reading inode table blocks %llu-%llu",
		       (unsigned long long)r->blk,
		       (unsigned long long)(r->blk + r->nblk - 1));
}

static int read_run(struct e4_ctx *c, const struct e4_run *r, unsigned char *buf)
{
	errcode_t err = io_channel_read_blk64(c->fs->io, r->blk, (int)r->nblk, buf);

	return err ? run_failed(c, r, err) : 0;
}

/*
 * One run buffer serves every run, in planning and in writing: fresh
 * memory would cost a page clearing per page, more than the read and
 * the shift together, and its page faults more again (si_alloc_big()).
 */
static unsigned char *run_buffer(struct e4_ctx *c, const struct e4_runs *rs)
{
	size_t len = 0;

	for (size_t i = 0; i < rs->nr; i++)
		if ((size_t)rs->r[i].nblk * c->bsz > len)
			len = (size_t)rs->r[i].nblk * c->bsz;
	if (c->run || !len)
		return c->run;
	c->run = si_alloc_big(&len);
	if (!c->run)
		si_error(c->h, ENOMEM, "%s: out of memory", c->name);
	return c->run;
}

/*
 * Planning reads runs with pread(2), not through libext2fs's I/O
 * channel, so that two threads can: nothing is written yet, so the
 * image holds what the channel would return.
 */
static int plan_read(struct e4_ctx *c, const struct e4_run *r, unsigned char *buf)
{
	size_t len = (size_t)r->nblk * c->bsz, done = 0;
	off_t at = (off_t)(c->offset + r->blk * c->bsz);

	while (done < len) {
		ssize_t n = pread(c->fd, buf + done, len - done, at + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return run_failed(c, r, n < 0 ? errno : EXT2_ET_SHORT_READ);
		done += (size_t)n;
	}
	return 0;
}

/* Plans runs [from, to), until one fails or *stop is set. */
static int plan_some(struct e4_ctx *c, struct e4_runs *rs, size_t from,
		     size_t to, atomic_bool *stop)
{
	unsigned char *buf = run_buffer(c, rs);

	if (!buf && rs->nr)
		return -ENOMEM;
	for (size_t i = from; i < to && !atomic_load(stop); i++) {
		struct e4_run *r = &rs->r[i];
		int res = plan_read(c, r, buf);

		if (!res)
			res = shift_run(c, r, buf);
		if (res < 0)
			return res;
		r->dirty = res & SI_CHANGED;
		si_progress(c->h, c->h->tally.st.objects, rs->inodes);
	}
	return 0;
}

/*
 * The second planning thread: the upper half of the runs, with a handle
 * of its own for its tally and its first error (neither reports
 * progress or lists), and buffers of its own; the EA blocks are shared.
 */
struct half {
	struct e4_ctx c;
	struct shiftimg h;
	struct e4_runs *rs;
	size_t from;
	atomic_bool *stop;
	int err;
};

static void *half_main(void *arg)
{
	struct half *hf = arg;

	hf->err = plan_some(&hf->c, hf->rs, hf->from, hf->rs->nr, hf->stop);
	return NULL;
}

static int half_init(struct half *hf, struct e4_ctx *c, struct e4_runs *rs)
{
	uint64_t want = 0, half = 0;
	size_t i;

	for (i = 0; i < rs->nr; i++)
		want += rs->r[i].nblk;
	for (i = 0; i < rs->nr && half < want / 2; i++)
		half += rs->r[i].nblk;
	hf->rs = rs;
	hf->from = i;
	hf->h = *c->h;
	si_tally_init(&hf->h.tally);
	hf->h.err[0] = '\0';
	hf->h.list_fn = NULL;
	hf->h.progress_fn = NULL;
	if (pthread_mutex_init(&hf->h.lock, NULL))
		return -EAGAIN;
	hf->c = *c;
	hf->c.h = &hf->h;
	hf->c.run = NULL;
	hf->c.out = hf->c.pull = (struct e4_moved){ 0 };
	hf->c.spill = NULL;
	hf->c.nr_spill = hf->c.cap_spill = 0;
	hf->c.scratch = scratch_new(c);
	if (!hf->c.scratch) {
		pthread_mutex_destroy(&hf->h.lock);
		return -ENOMEM;
	}
	return 0;
}

/* The upper half's spills follow the lower half's: both in inode order. */
static int half_join(struct e4_ctx *c, struct half *hf)
{
	size_t n = c->nr_spill + hf->c.nr_spill;
	struct e4_spill *s;

	si_tally_merge(&c->h->tally, &hf->h.tally);
	if (!hf->c.nr_spill)
		return 0;
	s = realloc(c->spill, n * sizeof(*s));
	if (!s)
		return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
	memcpy(s + c->nr_spill, hf->c.spill, hf->c.nr_spill * sizeof(*s));
	c->spill = s;
	c->nr_spill = c->cap_spill = n;
	hf->c.nr_spill = 0;
	return 0;
}

static void half_free(struct half *hf)
{
	thread_free(&hf->c);
	si_tally_free(&hf->h.tally);
	pthread_mutex_destroy(&hf->h.lock);
}

/*
 * Two threads plan large images, each half of the runs: reading and
 * checking the tables is most of planning, and halves scale on two
 * cores where handing runs from one thread to another did not.  The
 * lower half's error wins, as it would in one thread; the upper half's
 * is taken when the lower half has none.  Listing keeps one thread, in
 * inode order.
 */
#define SPLIT_MIN	65536		/* in-use inodes worth a second thread */

/* SHIFTIMG_PLAN_SPLIT_MIN lets the tests split small images. */
static uint64_t split_min(void)
{
	const char *s = getenv("SHIFTIMG_PLAN_SPLIT_MIN");

	return s && *s ? strtoull(s, NULL, 10) : SPLIT_MIN;
}

static int plan_inodes(struct e4_ctx *c, struct e4_runs *rs)
{
	atomic_bool stop = false;
	struct half hf;
	pthread_t tid;
	int err;

	if (c->listing || si_threads(c->h) < 2 || rs->inodes < split_min() ||
	    rs->nr < 2 || half_init(&hf, c, rs) < 0)
		return plan_some(c, rs, 0, rs->nr, &stop);
	hf.stop = &stop;
	if (pthread_create(&tid, NULL, half_main, &hf)) {
		half_free(&hf);
		return plan_some(c, rs, 0, rs->nr, &stop);
	}
	err = plan_some(c, rs, 0, hf.from, &stop);
	if (err)
		atomic_store(&stop, true);
	pthread_join(tid, NULL);
	if (!err && hf.err)
		err = si_error(c->h, -hf.err, "%s",
			       hf.h.err[0] ? hf.h.err : strerror(-hf.err));
	if (!err)
		err = half_join(c, &hf);
	half_free(&hf);
	return err;
}

/* ---- writing ---- */

/*
 * Each changed run is read and shifted again, exactly as planned (the
 * image is locked, and planning refused everything that could fail),
 * then written back.  The second read comes from the page cache.
 */
static int write_runs(struct e4_ctx *c, struct e4_runs *rs)
{
	unsigned char *buf = c->run;
	int err = 0;

	c->replay = true;
	for (size_t i = 0; !err && i < rs->nr; i++) {
		struct e4_run *r = &rs->r[i];

		if (!r->dirty)
			continue;
		err = read_run(c, r, buf);
		if (!err)
			err = shift_run(c, r, buf) < 0 ? -EIO : 0;
		if (!err)
			err = e4_write_blocks(c, r->blk, r->nblk, buf);
		/*
		 * The disk writes the run while the next ones are shifted,
		 * instead of all of them in the final flush.  Only written
		 * pages start: with a journal, those of committed batches.
		 */
		if (!err)
			sync_file_range(c->fd, (off64_t)(c->offset + r->blk * c->bsz),
					(off64_t)r->nblk * c->bsz, SYNC_FILE_RANGE_WRITE);
	}
	c->replay = false;
	return err;
}

/* ---- the passes ---- */

static size_t budget(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	size_t b = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz / 4 : 256u << 20;

	return b < BUDGET_MAX ? b : BUDGET_MAX;
}

static int shared_init(struct e4_shared *sh)
{
	pthread_mutexattr_t a;
	int err;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	err = pthread_mutex_init(&sh->lock, &a);
	pthread_mutexattr_destroy(&a);
	return -err;
}

static void ctx_free(struct e4_ctx *c, struct e4_runs *rs)
{
	free(rs->r);
	thread_free(c);
	for (size_t i = 0; i < c->sh->ea_cap; i++) {
		free(c->sh->ea[i].buf);
		if (c->sh->ea[i].edit)
			e4_moved_free(&c->sh->ea[i].edit->pulled);
		free(c->sh->ea[i].edit);
	}
	free(c->sh->ea);
	free(c->newblk);
	free(c->sh->meta);
	free(c->ibits);
	e4_quota_free(c);
}

static int plan(struct e4_ctx *c, const struct si_target *t, struct e4_runs *rs)
{
	int err;

	err = e4_check_mounted(c, t);
	if (!err)
		err = e4_check_super(c);
	if (!err)
		err = e4_check_desc(c);
	if (!err)
		err = plan_runs(c, rs);
	if (!err)
		err = plan_inodes(c, rs);
	if (!err)
		err = e4_plan_spills(c);
	if (!err)
		err = e4_quota_plan(c);
	return err;
}

static int apply(struct e4_ctx *c, struct e4_runs *rs)
{
	unsigned char *tmp = NULL;
	int err;

	if (c->h->rules.unmapped == SHIFTIMG_UNMAPPED_FAIL && c->h->tally.st.unmapped)
		return si_unmapped_refuse(c->h, c->name);
	if (c->h->tally.privileged && si_check_privileged(c->h))
		return si_privileged_refuse(c->h, c->name);
	err = write_runs(c, rs);
	if (!err && (c->sh->ea_nr || c->nr_new) && !(tmp = malloc(c->bsz)))
		err = si_error(c->h, ENOMEM, "%s: out of memory", c->name);
	if (!err)
		err = e4_write_ea(c, tmp);
	if (!err)
		err = e4_write_new(c, tmp);
	free(tmp);
	/* The quota files are written by libext2fs, after everything journaled. */
	if (!err)
		err = si_journal_flush(c->h->journal);
	if (!err)
		err = e4_quota_write(c);
	return err;
}

static void init_errors(void)
{
	initialize_ext2_error_table();
}

/*
 * Without quota files to rewrite, the shift changes inode tables and EA
 * blocks only, and the superblock is left as it was: libext2fs would
 * otherwise add the bytes written to s_kbytes_written and stamp
 * s_wtime, so that shifting and shifting back would not give the same
 * image.  The data still reaches the disk (io_channel_flush syncs).
 */
static errcode_t close_fs(struct e4_ctx *c)
{
	errcode_t err = 0, cerr;

	/*
	 * Quota files that moved, and EA blocks allocated for spilled
	 * values, change bitmaps, descriptors and counts.
	 */
	if (c->quota[0].buf || c->quota[1].buf || c->quota[2].buf || c->nr_new)
		return ext2fs_close2(c->fs, 0);
	if (c->fs->flags & EXT2_FLAG_RW) {
		err = io_channel_flush(c->fs->io);
		c->fs->flags &= ~(EXT2_FLAG_RW | EXT2_FLAG_DIRTY);
	}
	cerr = ext2fs_close2(c->fs, 0);
	return err ? err : cerr;
}

static int shift_fd(struct shiftimg *h, const struct si_target *t, int fd,
		    enum si_pass pass)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct e4_shared sh = { .budget = budget() };
	struct e4_ctx c = {
		.h = h, .name = t->path, .apply = pass == SI_PASS_APPLY,
		.listing = h->list_fn != NULL || (h->flags & SHIFTIMG_DRY_RUN),
		.sh = &sh,
	};
	struct e4_runs rs = { 0 };
	errcode_t cerr;
	int err;

	/* libext2fs's messages come from com_err, once its table is known. */
	pthread_once(&once, init_errors);
	err = shared_init(&sh);
	if (err)
		return si_error(h, -err, "%s: %s", c.name, strerror(-err));
	err = e4_open_fs(&c, fd, c.apply, S_ISBLK(t->st.st_mode));
	if (err)
		goto out_lock;
	c.scratch = scratch_new(&c);
	if (!c.scratch) {
		err = si_error(h, ENOMEM, "%s: out of memory", c.name);
		goto out_close;
	}
	if (c.apply && c.csum && c.isz > I_EXTRA_ISIZE)
		csum_tables(&c);
	if (c.apply && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		err = e4_refuse(&c, EBUSY, "another process holds a lock on it");
		goto out_close;
	}
	err = plan(&c, t, &rs);
	if (!err && c.apply)
		err = apply(&c, &rs);
out_close:
	cerr = close_fs(&c);
	if (!err && cerr)
		err = e4_fail(&c, cerr, "flushing");
	ctx_free(&c, &rs);
out_lock:
	pthread_mutex_destroy(&sh.lock);
	return err;
}

static int ext4_shift(struct shiftimg *h, const struct si_target *t,
		      enum si_pass pass)
{
	const char *out = si_option(h, "output");
	char *tmp = NULL;
	int fd = -1, err;

	if (!out || pass == SI_PASS_CHECK)
		return shift_fd(h, t, t->fd, pass);

	struct e4_ctx c = { .h = h, .name = t->path };

	/* A copy of a mounted filesystem would be torn. */
	err = e4_check_mounted(&c, t);
	if (!err)
		err = e4_make_copy(&c, t, out, &tmp, &fd);
	if (err)
		return err;
	struct si_target copy = *t;

	/* Messages keep naming the input: that is what the user gave. */
	copy.fd = fd;
	if (fstat(fd, &copy.st) < 0)
		err = si_error(h, errno, "%s: %s", tmp, strerror(errno));
	if (!err)
		err = shift_fd(h, &copy, fd, pass);
	if (!err && fsync(fd) < 0)
		err = si_error(h, errno, "%s: %s", tmp, strerror(errno));
	if (!err && rename(tmp, out) < 0)
		err = si_error(h, errno, "%s: %s", out, strerror(errno));
	close(fd);
	if (err)
		unlink(tmp);
	free(tmp);
	return err;
}

static const char *const ext4_options[] = { "output", "offset", "journal", NULL };

const struct si_backend si_ext4_backend = {
	.name = "ext4",
	/* Every refusal is decided before the first write. */
	.flags = SI_BACKEND_ATOMIC,
	.options = ext4_options,
	.probe = e4_probe,
	.shift = ext4_shift,
};
