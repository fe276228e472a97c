/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ext4 backend's private pieces: the run context shared by ext4.c
 * (inode tables), ext4-open.c (the probe, opening, the superblock and
 * mount checks, copies), ext4-eablock.c (EA blocks, and where spilled
 * values go), ext4-xattr.c (xattr areas in inodes and EA blocks) and
 * ext4-quota.c (quota files).
 */
#ifndef SHIFTIMG_EXT4_H
#define SHIFTIMG_EXT4_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ext2fs/ext2fs.h>

#include "backend.h"

/*
 * xattr entries taken out of one area for another, packed one after
 * the other: name index, name length, value size (4 bytes, little
 * endian), name, value.
 */
struct e4_moved {
	unsigned char *buf;
	size_t len, cap;
	unsigned int nr;
};

/* What happens to an EA block beyond the shift of its values. */
struct e4_edit {
	struct e4_moved pulled;		/* entries that left it for its inode */
	const struct e4_moved *add;	/* entries added to it in place */
	uint32_t drop;			/* sharers that moved to a copy */
};

/* One EA block met while scanning the inodes, shifted once. */
struct e4_ea {
	blk64_t blk;			/* 0: empty slot */
	unsigned char *buf;		/* shifted contents, if kept */
	unsigned int res;		/* SI_CHANGED/SI_UNMAPPED/E4_MOVED */
	uint32_t nref;			/* in-use inodes that point at it */
	struct e4_edit *edit;		/* NULL for almost every block */
};

/*
 * An inode whose grown values leave its inode body for an EA block:
 * its own, or one allocated for it (shared with the inodes that move
 * the same entries from the same block, as the kernel's mbcache would).
 */
struct e4_spill {
	ext2_ino_t ino;
	uint32_t id[3];			/* owner, group and project after the shift */
	blk64_t from;			/* its EA block before (0: none) */
	blk64_t to;			/* and after */
	struct e4_moved m;		/* the entries that move */
};

/* An EA block allocated for spilled entries. */
struct e4_newblk {
	blk64_t blk;
	blk64_t from;			/* the shared block it copies (0: none) */
	uint32_t refs;			/* the inodes that will point at it */
	const struct e4_moved *m;	/* the entries added */
};

/*
 * What the threads that plan a run share: the EA blocks met, shifted
 * once whoever meets them first, and the metadata an EA block must not
 * be.  The lock also serialises libext2fs's I/O channel, which is not
 * thread-safe: EA block reads and the directory reads of e4_path().
 */
struct e4_shared {
	pthread_mutex_t lock;		/* recursive: e4_path() may nest */
	/* EA blocks, open-addressed by block number. */
	struct e4_ea *ea;
	size_t ea_cap, ea_nr;
	bool have_bbitmap;
	/* Metadata block ranges an EA block must not fall into, sorted. */
	struct e4_range { blk64_t first, last; } *meta;
	size_t nr_meta;
	/* Memory for shifted EA blocks kept between planning and writing. */
	size_t budget, kept;
};

struct e4_ctx {
	struct shiftimg *h;
	const char *name;		/* the target as the user named it */
	ext2_filsys fs;
	int fd;				/* the image, for starting writeback */
	uint64_t offset;		/* of the filesystem in it (--offset) */
	bool apply;			/* SI_PASS_APPLY */
	bool replay;			/* recomputing a block not kept in memory */
	bool listing;			/* report changed objects */
	unsigned int isz;		/* inode size */
	unsigned int bsz;		/* block size */
	bool csum;			/* metadata_csum */
	uint32_t seed;			/* checksum seed */
	bool have_ctab;
	uint32_t ctab[8][256];		/* crc32c of each owner byte's change */

	/* Owner and group ids the map covers, as si_shift_id() gave them. */
#define E4_IDC	256
	struct e4_idc {
		uint32_t id, to;
		int res;
		bool valid;
	} idc[2][E4_IDC];

	/* Inodes in use: a flat copy of the inode bitmap. */
	unsigned char *ibits;

	/* The EA blocks met, shared by the threads that plan. */
	struct e4_shared *sh;
	unsigned char *run;		/* this thread's inode-table run buffer */

	/*
	 * The rewritten user, group (and, when spilled values take new
	 * blocks, project) quota files, planned before writing.
	 */
	struct e4_qfile {
		ext2_ino_t ino;
		unsigned char *buf;
		size_t len;
	} quota[3];

	/* Entries moving out of the inode body or the EA block being shifted. */
	struct e4_moved out, pull;
	/* Inodes whose grown values spill out of the body, in inode order. */
	struct e4_spill *spill;
	size_t nr_spill, cap_spill;
	/* EA blocks allocated for them (in planning, marked in memory only). */
	struct e4_newblk *newblk;
	size_t nr_new, cap_new;

	/* Scratch for xattr areas: one block plus values moved aside. */
	unsigned char *scratch;
	uint64_t writes;		/* blocks written */
};

/* ext4.c: the one place that writes a run of blocks in place. */
int e4_write_blocks(struct e4_ctx *c, blk64_t blk, unsigned int count,
		    const void *buf);
/* An error from libext2fs, named after what was being done. */
int e4_fail(struct e4_ctx *c, errcode_t err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
uint32_t e4_crc32c(uint32_t crc, const void *p, size_t len);
/* "PATH (inode N)", or "<inode N>"; reads every directory: errors only. */
const char *e4_path(struct e4_ctx *c, ext2_ino_t ino, char *buf, size_t size);
/* A refusal naming the inode by its path (read only for the message). */
int e4_refuse_ino(struct e4_ctx *c, ext2_ino_t ino, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* ext4-open.c */
/* A superblock at 1024, or a partition table (for --offset). */
bool e4_probe(const struct si_target *t);
/*
 * Opens the filesystem through the descriptor the driver checked (at
 * --offset), and fills in c's sizes and checksum seed.
 */
int e4_open_fs(struct e4_ctx *c, int fd, bool rw, bool blockdev);
/* "TARGET: why; nothing was changed". */
int e4_refuse(struct e4_ctx *c, int err, const char *why);
/* The states in which rewriting metadata behind the kernel's back is unsafe. */
int e4_check_super(struct e4_ctx *c);
int e4_check_desc(struct e4_ctx *c);
/* Refuses an image mounted, or held through a loop device on it. */
int e4_check_mounted(struct e4_ctx *c, const struct si_target *t);
/* Makes OUT.shiftimg-tmp, a copy of the target (a reflink where possible). */
int e4_make_copy(struct e4_ctx *c, const struct si_target *t,
		 const char *out, char **tmpp, int *fdp);

/* ext4-eablock.c */
/*
 * Planning: shifts an inode's EA block the first time one of its inodes
 * is met; returns what the block held (SI_CHANGED/SI_UNMAPPED/
 * E4_PRIV_CAP/E4_MOVED bits) or si_error()'s value.
 */
int e4_ea_visit(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk);
/* The edit planned for a known EA block. */
const struct e4_edit *e4_ea_edit(struct e4_ctx *c, blk64_t blk);
/* Decides the EA block each spilling inode ends up with. */
int e4_plan_spills(struct e4_ctx *c);
/* Writing: the changed EA blocks, then those allocated for spills. */
int e4_write_ea(struct e4_ctx *c, unsigned char *tmp);
int e4_write_new(struct e4_ctx *c, unsigned char *buf);

/* ext4-xattr.c */
enum e4_area { E4_AREA_INODE, E4_AREA_BLOCK };
/* Beside SI_CHANGED/SI_UNMAPPED: a capability value becomes real root's. */
#define E4_PRIV_CAP	(1 << 8)
/* Beside them: grown values left the area (see e4_xattr_area()). */
#define E4_MOVED	(1 << 10)
#define E4_XA_HDR	32		/* an EA block's header */
/*
 * Shifts the ACLs, capabilities and override_stat values of one xattr
 * area in place: [first, end) holds the entries, value offsets count
 * from base.  When a grown value does not fit, the growing entries are
 * taken out, in entry order, until the rest fits, and appended to out
 * with their new values (E4_MOVED); without out, that is a refusal.
 * Returns SI_CHANGED/SI_UNMAPPED/E4_PRIV_CAP/E4_MOVED bits or
 * si_error()'s value.
 */
int e4_xattr_area(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk,
		  enum e4_area kind, unsigned char *base, unsigned char *first,
		  unsigned char *end, struct e4_moved *out);
/*
 * Shifts one EA block (buf holds it) and resets its hashes and
 * checksum.  out, if given, takes the values that no longer fit, as
 * long as the block is not shared.
 */
int e4_xattr_block(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk,
		   unsigned char *buf, struct e4_moved *out);
/*
 * Adds the entries of m to an area, sorted by name in an EA block (the
 * kernel's lookup there stops at the first larger name), after the
 * others in the inode body.  Returns 0, or -ENOSPC with nothing changed.
 */
int e4_xattr_insert(enum e4_area kind, unsigned char *base,
		    unsigned char *first, unsigned char *end,
		    const struct e4_moved *m);
/* An empty EA block, for spilled entries. */
void e4_xattr_block_init(unsigned char *buf, unsigned int bsz);
/* Sets an edited EA block's hash (if it has one, or always) and checksum. */
void e4_xattr_block_seal(struct e4_ctx *c, blk64_t blk, unsigned char *buf,
			 bool hash);
/* "security.capability", "user.containers.override_stat" or "xattr". */
const char *e4_moved_names(const struct e4_moved *m);
bool e4_moved_same(const struct e4_moved *a, const struct e4_moved *b);
int e4_moved_copy(struct e4_ctx *c, struct e4_moved *to,
		  const struct e4_moved *from);
void e4_moved_free(struct e4_moved *m);

/*
 * ext4-quota.c: plans the user and group quota files with their ids
 * shifted (usage and limits follow the ids), charges the EA blocks
 * allocated for spilled values to their inodes' ids (the project quota
 * file too, then), and writes them.
 */
int e4_quota_plan(struct e4_ctx *c);
int e4_quota_write(struct e4_ctx *c);
void e4_quota_free(struct e4_ctx *c);

#endif /* SHIFTIMG_EXT4_H */
