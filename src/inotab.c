// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The inode tables of a mounted ext2/3/4 filesystem, read from its block
 * device, so that the tree walk lists the xattrs only of the inodes that
 * may hold an id in one.
 *
 * A check pass that looks at every object spends a third of its system
 * time in llistxattr(2), and most inodes of a container tree have no
 * xattr at all.  Their table entries say so: an ext4 inode keeps its
 * xattrs in the space after its fixed fields (a header, then entries
 * whose namespace index and name are plain) or in a block the entry
 * names.  The filesystem keeps those tables in its block device's page
 * cache and updates them there within the system call that changes an
 * inode, so a buffered read of the device sees what the filesystem sees.
 *
 * An entry read earlier may be stale by the time the walk stats the
 * inode.  Every xattr change sets the inode's ctime, so an entry is
 * judged only if its mode, owner and ctime, to the nanosecond, are what
 * statx has just returned; anything else (a filesystem mounted with
 * lazytime, an idmapped mount, a table read mid-update) is listed as
 * before.  What can still be missed is an xattr set while the walk runs,
 * between the read and the statx, within the clock tick of the inode's
 * last change: an xattr set just after a listing is missed the same
 * way, and a tree changed during a run is never promised to be shifted
 * whole (only never to be left).  Reads are in chunks of the table,
 * since a directory's inodes are mostly neighbours; a thread whose
 * chunks serve too few inodes stops reading them.
 */
#include <errno.h>
#include <ext2fs/ext2fs.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "inotab.h"
#include "le.h"

#define OLD_INODE_SIZE	128
#define XATTR_MAGIC	0xEA020000u
#define ENTRY_HEAD	16		/* struct ext4_xattr_entry before its name */
/* Below this many inodes served per chunk read, listing is cheaper. */
#define MIN_HITS_PER_READ 4
#define TRIAL_READS	64

struct si_inotab {
	int fd;				/* the block device, read only */
	unsigned int major, minor;
	unsigned int isize;		/* bytes of one table entry */
	uint32_t per_group;		/* inodes in a group */
	uint32_t per_chunk;		/* inodes in a chunk */
	uint32_t chunks_per_group;
	uint64_t count;			/* inodes in the filesystem */
	dgrp_t groups;
	uint64_t *table;		/* byte offset of each group's table */
};

/* ---- one raw inode ---- */

/*
 * An xattr of an ext4 namespace index (fs/ext4/xattr.h) that cannot hold
 * an id: user.* other than containers.override_stat, trusted.*,
 * security.* other than capability, system.data (inline data) and the
 * encryption context.  ACLs are indices 2 and 3; anything unknown is
 * listed.
 */
static bool entry_plain(unsigned int index, const unsigned char *name,
			size_t len)
{
	static const char override[] = "containers.override_stat";
	static const char cap[] = "capability";

	switch (index) {
	case 1:
		return len != sizeof(override) - 1 || memcmp(name, override, len);
	case 4:
	case 7:
	case 9:
		return true;
	case 6:
		return len != sizeof(cap) - 1 || memcmp(name, cap, len);
	default:
		return false;
	}
}

/* The xattrs kept in the inode itself: p is the space after its fields. */
static bool body_plain(const unsigned char *p, size_t len)
{
	size_t off = 4;

	if (len < 4 || get32(p) != XATTR_MAGIC)
		return true;		/* no header: the kernel sees none */
	while (off + 4 <= len) {
		size_t size;

		if (!get32(p + off))
			return true;	/* the end of the entries */
		if (off + ENTRY_HEAD > len)
			return false;
		size = (ENTRY_HEAD + p[off] + 3) & ~(size_t)3;
		if (off + size > len ||
		    !entry_plain(p[off + 1], p + off + ENTRY_HEAD, p[off]))
			return false;
		off += size;
	}
	return false;			/* no end: not ours to judge */
}

bool si_inotab_raw_plain(const unsigned char *raw, size_t isize,
			 const struct statx *sx)
{
	size_t extra;
	uint32_t ext, uid, gid;
	int64_t sec;

	if (isize < OLD_INODE_SIZE + 8 || !(sx->stx_mask & STATX_CTIME))
		return false;
	/* i_extra_isize must reach past i_ctime_extra (offset 0x84). */
	extra = get16(raw + 0x80);
	if (extra < 8 || extra % 4 || OLD_INODE_SIZE + extra > isize)
		return false;
	uid = get16(raw + 0x02) | (uint32_t)get16(raw + 0x78) << 16;
	gid = get16(raw + 0x18) | (uint32_t)get16(raw + 0x7a) << 16;
	ext = get32(raw + 0x84);
	sec = (int32_t)get32(raw + 0x0c) + ((int64_t)(ext & 3) << 32);
	if (get16(raw) != sx->stx_mode || uid != sx->stx_uid ||
	    gid != sx->stx_gid || sec != sx->stx_ctime.tv_sec ||
	    ext >> 2 != sx->stx_ctime.tv_nsec)
		return false;
	if (get32(raw + 0x68) || get16(raw + 0x76))
		return false;		/* an xattr block: not read here */
	return body_plain(raw + OLD_INODE_SIZE + extra,
			  isize - OLD_INODE_SIZE - extra);
}

/* ---- the tables ---- */

/* The device node of block device dev, opened read only; -1 if none. */
static int open_device(dev_t dev)
{
	char path[64], line[256], node[300];
	struct stat st;
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/uevent",
		 major(dev), minor(dev));
	f = fopen(path, "re");
	if (!f)
		return -1;
	node[0] = '\0';
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "DEVNAME=", 8)) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(node, sizeof(node), "/dev/%s", line + 8);
		}
	fclose(f);
	if (!node[0] || strstr(node, ".."))
		return -1;
	fd = open(node, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISBLK(st.st_mode) || st.st_rdev != dev) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Where each group's table is, from the superblock and descriptors. */
static int read_layout(struct si_inotab *it)
{
	ext2_filsys fs;
	char name[64];
	int err = -1;

	snprintf(name, sizeof(name), "/proc/self/fd/%d", it->fd);
	if (ext2fs_open(name, EXT2_FLAG_64BITS | EXT2_FLAG_IGNORE_CSUM_ERRORS,
			0, 0, unix_io_manager, &fs))
		return -1;
	it->isize = EXT2_INODE_SIZE(fs->super);
	it->per_group = fs->super->s_inodes_per_group;
	it->count = fs->super->s_inodes_count;
	it->groups = fs->group_desc_count;
	/* Other systems lay out the owner's high bits elsewhere. */
	if (fs->super->s_creator_os != EXT2_OS_LINUX ||
	    it->isize < OLD_INODE_SIZE + 8 || it->isize > SI_INOTAB_CHUNK ||
	    !it->per_group)
		goto out_close;
	it->per_chunk = SI_INOTAB_CHUNK / it->isize;
	it->chunks_per_group = (it->per_group + it->per_chunk - 1) / it->per_chunk;
	it->table = calloc(it->groups, sizeof(*it->table));
	if (!it->table)
		goto out_close;
	for (dgrp_t g = 0; g < it->groups; g++)
		it->table[g] = ext2fs_inode_table_loc(fs, g) * (uint64_t)fs->blocksize;
	err = 0;
out_close:
	ext2fs_close_free(&fs);
	return err;
}

struct si_inotab *si_inotab_open(int dirfd)
{
	const char *env = getenv("SHIFTIMG_INOTAB");
	struct si_inotab *it;
	struct statfs sf;
	struct stat st;

	if ((env && !strcmp(env, "off")) || fstatfs(dirfd, &sf) < 0 ||
	    sf.f_type != EXT4_SUPER_MAGIC || fstat(dirfd, &st) < 0)
		return NULL;
	it = calloc(1, sizeof(*it));
	if (!it)
		return NULL;
	it->fd = open_device(st.st_dev);
	if (it->fd < 0)
		goto out_free;
	it->major = major(st.st_dev);
	it->minor = minor(st.st_dev);
	if (read_layout(it))
		goto out_close;
	return it;

out_close:
	close(it->fd);
out_free:
	free(it->table);
	free(it);
	return NULL;
}

void si_inotab_close(struct si_inotab *it)
{
	if (!it)
		return;
	close(it->fd);
	free(it->table);
	free(it);
}

void si_inotab_cache_free(struct si_inotab_cache *c)
{
	free(c->buf);
	c->buf = NULL;
}

/* The slot that holds chunk of group g, read now if need be; -1 if none. */
static int chunk_slot(struct si_inotab *it, struct si_inotab_cache *c,
		      dgrp_t g, uint32_t chunk)
{
	uint64_t key = (uint64_t)g * it->chunks_per_group + chunk + 1;
	uint32_t first = chunk * it->per_chunk;
	uint32_t n = it->per_group - first < it->per_chunk ?
		     it->per_group - first : it->per_chunk;
	unsigned int s;
	ssize_t got;

	for (s = 0; s < SI_INOTAB_SLOTS; s++)
		if (c->key[s] == key)
			return (int)s;
	if (!c->buf && !(c->buf = malloc(SI_INOTAB_SLOTS * SI_INOTAB_CHUNK)))
		return -1;
	s = c->next++ % SI_INOTAB_SLOTS;
	c->key[s] = 0;
	got = pread(it->fd, c->buf + (size_t)s * SI_INOTAB_CHUNK,
		    (size_t)n * it->isize,
		    (off_t)(it->table[g] + (uint64_t)first * it->isize));
	c->reads++;
	if (got < 0)
		return -1;
	c->key[s] = key;
	c->len[s] = (size_t)got;
	return (int)s;
}

bool si_inotab_plain(struct si_inotab *it, struct si_inotab_cache *c,
		     const struct statx *sx)
{
	uint64_t i = sx->stx_ino - 1;
	size_t at;
	dgrp_t g;
	int s;

	if (!it || c->off || sx->stx_dev_major != it->major ||
	    sx->stx_dev_minor != it->minor || !sx->stx_ino ||
	    sx->stx_ino > it->count)
		return false;
	if (c->reads >= TRIAL_READS && c->hits < MIN_HITS_PER_READ * c->reads) {
		c->off = true;
		return false;
	}
	g = (dgrp_t)(i / it->per_group);
	i %= it->per_group;
	if (g >= it->groups)
		return false;
	s = chunk_slot(it, c, g, (uint32_t)(i / it->per_chunk));
	if (s < 0)
		return false;
	c->hits++;
	at = (size_t)(i % it->per_chunk) * it->isize;
	if (at + it->isize > c->len[s])
		return false;
	return si_inotab_raw_plain(c->buf + (size_t)s * SI_INOTAB_CHUNK + at,
				   it->isize, sx);
}
