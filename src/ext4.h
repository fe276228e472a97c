/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ext4 backend's private pieces: the run context shared by ext4.c
 * (superblock checks, inode tables, EA blocks, copies), ext4-xattr.c
 * (xattr areas in inodes and EA blocks) and ext4-quota.c (quota files).
 */
#ifndef SHIFTIMG_EXT4_H
#define SHIFTIMG_EXT4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ext2fs/ext2fs.h>

#include "backend.h"

/* One EA block met while scanning the inodes, shifted once. */
struct e4_ea {
	blk64_t blk;			/* 0: empty slot */
	unsigned char *buf;		/* shifted contents, if kept */
	unsigned int res;		/* SI_CHANGED/SI_UNMAPPED of its values */
};

struct e4_ctx {
	struct shiftimg *h;
	const char *name;		/* the target as the user named it */
	ext2_filsys fs;
	bool apply;			/* SI_PASS_APPLY */
	bool replay;			/* recomputing a block not kept in memory */
	bool listing;			/* report changed objects */
	unsigned int isz;		/* inode size */
	unsigned int bsz;		/* block size */
	bool csum;			/* metadata_csum */
	uint32_t seed;			/* checksum seed */
	bool have_ctab;
	uint32_t ctab[8][256];		/* crc32c of each owner byte's change */

	/* Inodes in use: a flat copy of the inode bitmap. */
	unsigned char *ibits;

	/* EA blocks, open-addressed by block number. */
	struct e4_ea *ea;
	size_t ea_cap, ea_nr;
	bool have_bbitmap;
	/* Metadata block ranges an EA block must not fall into, sorted. */
	struct e4_range { blk64_t first, last; } *meta;
	size_t nr_meta;

	/* Memory for shifted EA blocks kept between planning and writing. */
	size_t budget, kept;
	unsigned char *run;		/* the one inode-table run buffer */

	/* The rewritten user and group quota files, planned before writing. */
	struct e4_qfile {
		ext2_ino_t ino;
		unsigned char *buf;
		size_t len;
	} quota[2];

	/* Scratch for xattr areas: one block plus values moved aside. */
	unsigned char *scratch;
	uint64_t writes;		/* blocks written */
	unsigned char *old;		/* blocks as they were, for the journal */
	size_t old_cap;
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

/* ext4-xattr.c */
enum e4_area { E4_AREA_INODE, E4_AREA_BLOCK };
/* Beside SI_CHANGED/SI_UNMAPPED: a capability value becomes real root's. */
#define E4_PRIV_CAP	(1 << 8)
/*
 * Shifts the ACLs, capabilities and override_stat values of one xattr
 * area in place: [first, end) holds the entries, value offsets count
 * from base.  Returns SI_CHANGED/SI_UNMAPPED/E4_PRIV_CAP bits or
 * si_error()'s value.
 */
int e4_xattr_area(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk,
		  enum e4_area kind, unsigned char *base, unsigned char *first,
		  unsigned char *end);
/* Shifts one EA block (buf holds it) and resets its hashes and checksum. */
int e4_xattr_block(struct e4_ctx *c, ext2_ino_t ino, blk64_t blk,
		   unsigned char *buf);

/*
 * ext4-quota.c: plans the user and group quota files with their ids
 * shifted (usage and limits follow the ids), then writes them.
 */
int e4_quota_plan(struct e4_ctx *c);
int e4_quota_write(struct e4_ctx *c);
void e4_quota_free(struct e4_ctx *c);

#endif /* SHIFTIMG_EXT4_H */
