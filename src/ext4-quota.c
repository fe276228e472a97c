// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * ext4's hidden quota files (the quota feature), in the kernel's
 * "vfsv1" format: a header block, then a radix tree of 1 KiB blocks
 * indexed by the id's bytes, whose leaves point at blocks of 72-byte
 * records.  A record's place in the tree follows from its id, so after
 * a shift the file is built again: records are read from the old tree,
 * their ids shifted (usage and limits travel with them, records that
 * land on the same id are added up), and a new tree is laid out.
 * Project ids are not shifted (idmapped mounts do not map them), so the
 * project quota file is left alone, unless EA blocks allocated for
 * spilled values must be charged to it, as to the other two.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ext4.h"
#include "le.h"

#define QF_BLK		1024u
#define QF_DEPTH	4
#define QF_REFS		(QF_BLK / 4)
#define QF_HDR		16u		/* a data block's header */
#define QF_REC		72u		/* struct v2r1_disk_dqblk */
#define QF_PER_BLK	((QF_BLK - QF_HDR) / QF_REC)
#define QF_VERSION	1u
#define QF_MAX_SIZE	(256u << 20)

/* Record fields. */
#define R_ID		0
#define R_CURINODES	24
#define R_CURSPACE	48
#define R_ITIME		64

/* User, group, project: the indexes of c->quota and e4_spill.id. */
#define QF_PRJ		2
static const uint32_t qf_magic[3] = { 0xd9c01f11u, 0xd9c01927u, 0xd9c03f14u };
static const char *const qf_which[3] = { "user", "group", "project" };

struct qrec {
	uint32_t id;
	bool charge;			/* usage added for new EA blocks */
	unsigned char raw[QF_REC];
};

struct qread {
	struct e4_ctx *c;
	const char *which;
	const unsigned char *file;
	uint32_t nblk;
	unsigned char *seen;		/* one byte per block: visited */
	struct qrec *recs;
	size_t nr, cap;
};

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * The kernel stores an id-0 record whose fields are all zero with
 * itime 1, so that it does not read as a free slot.
 */
static bool rec_empty(const unsigned char *r)
{
	unsigned char z[QF_REC] = { 0 };

	put64(z + R_ITIME, 1);
	return !memcmp(r, z, QF_REC) || all_zero(r, QF_REC);
}

static int qbad(struct qread *q, const char *why)
{
	return si_error(q->c->h, EUCLEAN, "%s: %s quota file: %s; nothing was changed",
			q->c->name, q->which, why);
}

static int add_rec(struct qread *q, const unsigned char *raw)
{
	if (q->nr == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 64;
		struct qrec *r = realloc(q->recs, cap * sizeof(*r));

		if (!r)
			return si_error(q->c->h, ENOMEM, "%s: out of memory", q->c->name);
		q->recs = r;
		q->cap = cap;
	}
	q->recs[q->nr].id = get32(raw + R_ID);
	q->recs[q->nr].charge = false;
	memcpy(q->recs[q->nr].raw, raw, QF_REC);
	q->nr++;
	return 0;
}

static int read_data(struct qread *q, uint32_t blk)
{
	const unsigned char *b = q->file + (size_t)blk * QF_BLK;

	for (unsigned int i = 0; i < QF_PER_BLK; i++) {
		const unsigned char *r = b + QF_HDR + i * QF_REC;
		int err;

		if (all_zero(r, QF_REC))
			continue;
		err = add_rec(q, r);
		if (err)
			return err;
	}
	return 0;
}

/* Walks the tree; every block is visited once, so a loop cannot hang us. */
static int read_tree(struct qread *q, uint32_t blk, int depth)
{
	const unsigned char *b;

	if (blk <= 1 && depth > 0)
		return qbad(q, "tree reference to the header or the root");
	if (blk >= q->nblk)
		return qbad(q, "tree reference past the end of the file");
	if (q->seen[blk]) {
		/* Leaves may share a data block; index blocks never repeat. */
		if (depth == QF_DEPTH && q->seen[blk] == QF_DEPTH + 1)
			return 0;
		return qbad(q, "a block is referenced twice");
	}
	q->seen[blk] = (unsigned char)(depth + 1);
	if (depth == QF_DEPTH)
		return read_data(q, blk);
	b = q->file + (size_t)blk * QF_BLK;
	for (unsigned int i = 0; i < QF_REFS; i++) {
		uint32_t ref = get32(b + 4 * i);
		int err;

		if (!ref)
			continue;
		err = read_tree(q, ref, depth + 1);
		if (err)
			return err;
	}
	return 0;
}

/* By id; a charge after the record it adds to, which keeps its limits. */
static int rec_cmp(const void *a, const void *b)
{
	const struct qrec *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return (int)x->charge - (int)y->charge;
}

/*
 * One charge record per EA block allocated for a spilled inode (whose
 * ids are already shifted): the fold below adds it to the id's usage.
 */
static int add_charges(struct qread *q, int k)
{
	struct e4_ctx *c = q->c;
	uint64_t bytes = EXT2_CLUSTER_SIZE(c->fs->super);

	for (size_t i = 0; i < c->nr_spill; i++) {
		unsigned char raw[QF_REC] = { 0 };
		int err;

		if (c->spill[i].from)
			continue;
		put32(raw + R_ID, c->spill[i].id[k]);
		put64(raw + R_CURSPACE, bytes);
		err = add_rec(q, raw);
		if (err)
			return err;
		q->recs[q->nr - 1].charge = true;
	}
	return 0;
}

/* Shifts the ids, then folds records that met on one id together. */
static size_t shift_recs(struct e4_ctx *c, struct qrec *r, size_t n, int k)
{
	size_t out = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t to = r[i].id;

		if (r[i].charge)
			continue;
		if (k != QF_PRJ)
			si_shift_id(&c->h->rules, (enum si_kind)k, r[i].id, &to, NULL);
		if (rec_empty(r[i].raw))
			put64(r[i].raw + R_ITIME, 0);
		r[i].id = to;
		put32(r[i].raw + R_ID, to);
	}
	qsort(r, n, sizeof(*r), rec_cmp);
	for (size_t i = 0; i < n; i++) {
		if (out && r[out - 1].id == r[i].id) {
			struct qrec *d = &r[out - 1];

			put64(d->raw + R_CURINODES, get64(d->raw + R_CURINODES) +
						    get64(r[i].raw + R_CURINODES));
			put64(d->raw + R_CURSPACE, get64(d->raw + R_CURSPACE) +
						   get64(r[i].raw + R_CURSPACE));
			continue;
		}
		r[out++] = r[i];
	}
	for (size_t i = 0; i < out; i++)
		if (r[i].id == 0 && all_zero(r[i].raw, QF_REC))
			put64(r[i].raw + R_ITIME, 1);
	return out;
}

struct qbuild {
	unsigned char *buf;
	uint32_t nblk, cap;
};

static int new_block(struct e4_ctx *c, struct qbuild *b, uint32_t *blk)
{
	if (b->nblk == b->cap) {
		uint32_t cap = b->cap ? b->cap * 2 : 16;
		unsigned char *p = realloc(b->buf, (size_t)cap * QF_BLK);

		if (!p)
			return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
		memset(p + (size_t)b->cap * QF_BLK, 0, (size_t)(cap - b->cap) * QF_BLK);
		b->buf = p;
		b->cap = cap;
	}
	*blk = b->nblk++;
	return 0;
}

/* Lays the sorted records out: header, root, index blocks, data blocks. */
static int build(struct e4_ctx *c, const unsigned char *oldhdr,
		 const struct qrec *r, size_t n, struct qbuild *b)
{
	uint32_t path[QF_DEPTH] = { 0 }, data = 0, blk, used = QF_PER_BLK;
	int err;

	err = new_block(c, b, &blk);	/* 0: header */
	if (!err)
		err = new_block(c, b, &path[0]);	/* 1: root */
	for (size_t i = 0; !err && i < n; i++) {
		uint32_t id = r[i].id;
		int d;

		for (d = 1; !err && d < QF_DEPTH; d++) {
			unsigned char *parent = b->buf + (size_t)path[d - 1] * QF_BLK;
			unsigned int slot = (id >> ((QF_DEPTH - d) * 8)) & 0xff;

			if (!get32(parent + 4 * slot)) {
				err = new_block(c, b, &blk);
				parent = b->buf + (size_t)path[d - 1] * QF_BLK;
				if (!err)
					put32(parent + 4 * slot, blk);
			}
			if (!err)
				path[d] = get32(parent + 4 * slot);
		}
		if (!err && used == QF_PER_BLK) {
			err = new_block(c, b, &data);
			used = 0;
		}
		if (err)
			break;
		unsigned char *db = b->buf + (size_t)data * QF_BLK;

		memcpy(db + QF_HDR + used * QF_REC, r[i].raw, QF_REC);
		used++;
		db[8] = (unsigned char)used;	/* dqdh_entries, little endian */
		db[9] = 0;
		put32(b->buf + (size_t)path[QF_DEPTH - 1] * QF_BLK + 4 * (id & 0xff), data);
	}
	if (err)
		return err;

	unsigned char *h = b->buf;

	memcpy(h, oldhdr, 20);		/* magic, version, grace times, flags */
	put32(h + 20, b->nblk);		/* dqi_blocks */
	put32(h + 24, 0);		/* dqi_free_blk: no free blocks */
	put32(h + 28, data && used < QF_PER_BLK ? data : 0);	/* dqi_free_entry */
	return 0;
}

static int read_file(struct e4_ctx *c, ext2_ino_t ino, const char *which,
		     unsigned char **bufp, size_t *lenp)
{
	struct ext2_inode inode;
	ext2_file_t f;
	unsigned int got;
	errcode_t err;
	uint64_t size;
	unsigned char *buf;

	err = ext2fs_read_inode(c->fs, ino, &inode);
	if (err)
		return e4_fail(c, err, "reading the %s quota inode %u", which, ino);
	size = EXT2_I_SIZE(&inode);
	if (size < 2 * QF_BLK || size > QF_MAX_SIZE || size % QF_BLK)
		return si_error(c->h, EUCLEAN, "%s: %s quota file: size %llu is not a valid quota file; nothing was changed",
				c->name, which, (unsigned long long)size);
	buf = malloc(size);
	if (!buf)
		return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
	err = ext2fs_file_open(c->fs, ino, 0, &f);
	if (!err) {
		err = ext2fs_file_read(f, buf, (unsigned int)size, &got);
		if (!err && got != size)
			err = EXT2_ET_SHORT_READ;
		ext2fs_file_close(f);
	}
	if (err) {
		free(buf);
		return e4_fail(c, err, "reading the %s quota file", which);
	}
	*bufp = buf;
	*lenp = size;
	return 0;
}

static int plan_one(struct e4_ctx *c, int k, ext2_ino_t ino)
{
	const char *which = qf_which[k];
	struct qread q = { .c = c, .which = which };
	struct qbuild b = { 0 };
	unsigned char *file = NULL;
	size_t len = 0;
	int err;

	err = read_file(c, ino, which, &file, &len);
	if (err)
		return err;
	q.file = file;
	q.nblk = (uint32_t)(len / QF_BLK);
	if (get32(file) != qf_magic[k] || get32(file + 4) != QF_VERSION) {
		err = qbad(&q, "not a version 1 quota tree");
		goto out_free;
	}
	if (get32(file + 20) > q.nblk) {
		err = qbad(&q, "header names more blocks than the file has");
		goto out_free;
	}
	q.nblk = get32(file + 20);
	q.seen = calloc(q.nblk ? q.nblk : 1, 1);
	err = q.seen ? read_tree(&q, 1, 0) :
		si_error(c->h, ENOMEM, "%s: out of memory", c->name);
	if (!err)
		err = add_charges(&q, k);
	if (!err) {
		q.nr = shift_recs(c, q.recs, q.nr, k);
		err = build(c, file, q.recs, q.nr, &b);
	}
	if (!err) {
		c->quota[k].ino = ino;
		c->quota[k].buf = b.buf;
		c->quota[k].len = (size_t)b.nblk * QF_BLK;
		b.buf = NULL;
	}
out_free:
	free(b.buf);
	free(q.seen);
	free(q.recs);
	free(file);
	return err;
}

static bool have_charges(const struct e4_ctx *c)
{
	for (size_t i = 0; i < c->nr_spill; i++)
		if (!c->spill[i].from)
			return true;
	return false;
}

int e4_quota_plan(struct e4_ctx *c)
{
	struct ext2_super_block *sb = c->fs->super;
	int err = 0;

	if (!ext2fs_has_feature_quota(sb))
		return 0;
	if (sb->s_usr_quota_inum)
		err = plan_one(c, SI_KUID, sb->s_usr_quota_inum);
	if (!err && sb->s_grp_quota_inum)
		err = plan_one(c, SI_KGID, sb->s_grp_quota_inum);
	if (!err && sb->s_prj_quota_inum && have_charges(c))
		err = plan_one(c, QF_PRJ, sb->s_prj_quota_inum);
	return err;
}

/*
 * Writes a planned file through libext2fs, which allocates or frees
 * blocks as its size changes.
 */
static int write_one(struct e4_ctx *c, const struct e4_qfile *q)
{
	ext2_file_t f;
	unsigned int got;
	errcode_t err;

	err = ext2fs_file_open(c->fs, q->ino, EXT2_FILE_WRITE, &f);
	if (err)
		return e4_fail(c, err, "opening quota inode %u", q->ino);
	err = ext2fs_file_write(f, q->buf, (unsigned int)q->len, &got);
	if (!err && got != q->len)
		err = EXT2_ET_SHORT_WRITE;
	if (!err)
		err = ext2fs_file_set_size2(f, q->len);
	if (!err)
		err = ext2fs_file_close(f);
	else
		ext2fs_file_close(f);
	if (err)
		return e4_fail(c, err, "writing quota inode %u", q->ino);
	return 0;
}

int e4_quota_write(struct e4_ctx *c)
{
	errcode_t err;

	if (!c->quota[0].buf && !c->quota[1].buf && !c->quota[2].buf)
		return 0;
	/*
	 * The inode tables were rewritten under libext2fs: its cached
	 * table block would put the old neighbours of the quota inodes back.
	 */
	err = ext2fs_flush_icache(c->fs);
	if (!err)
		err = ext2fs_read_bitmaps(c->fs);
	if (err)
		return e4_fail(c, err, "reading the bitmaps");
	for (int k = 0; k < 3; k++) {
		int e = c->quota[k].buf ? write_one(c, &c->quota[k]) : 0;

		if (e)
			return e;
	}
	return 0;
}

void e4_quota_free(struct e4_ctx *c)
{
	for (int k = 0; k < 3; k++)
		free(c->quota[k].buf);
}
