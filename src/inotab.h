/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The inode tables of a mounted ext2/3/4 filesystem, read from its block
 * device, for the tree walk to tell which inodes need no xattr listing.
 */
#ifndef SHIFTIMG_INOTAB_H
#define SHIFTIMG_INOTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define SI_INOTAB_SLOTS	4		/* chunks a thread keeps */
#define SI_INOTAB_CHUNK	16384		/* bytes of inode table in a chunk */

struct si_inotab;

/* A thread's chunks of the tables: zero it before first use. */
struct si_inotab_cache {
	unsigned char *buf;		/* SI_INOTAB_SLOTS chunks */
	uint64_t key[SI_INOTAB_SLOTS];	/* chunk number + 1; 0: empty */
	size_t len[SI_INOTAB_SLOTS];
	unsigned int next;		/* the slot to refill */
	uint64_t reads, hits;
	bool off;			/* the chunks were not worth reading */
};

/*
 * The tables of the filesystem that holds the directory dirfd, or NULL
 * where they cannot be read (not ext2/3/4, no device node to read, no
 * permission, timestamps without nanoseconds).  NULL only costs speed.
 */
struct si_inotab *si_inotab_open(int dirfd);
void si_inotab_close(struct si_inotab *it);
void si_inotab_cache_free(struct si_inotab_cache *c);

/*
 * True if the inode statx saw (its mask with STATX_CTIME) has no xattr
 * that can hold an id; false if it may have one or the tables cannot
 * tell.  Only an inode whose table entry matches what statx saw, to the
 * nanosecond of its ctime, is judged: an xattr changes the ctime.
 */
bool si_inotab_plain(struct si_inotab *it, struct si_inotab_cache *c,
		     const struct statx *sx);

/* The judgement on one raw inode of isize bytes (exported for tests). */
bool si_inotab_raw_plain(const unsigned char *raw, size_t isize,
			 const struct statx *sx);

#endif /* SHIFTIMG_INOTAB_H */
