// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * floor: the least an in-place ownership shift of an ext4 image must
 * do: read the used part of every inode table and write it back, in
 * the same large runs shiftimg uses, then fsync.  No parsing, no
 * checksums: the I/O bound the benchmark compares against.
 *
 *   floor IMAGE
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <ext2fs/ext2fs.h>

#define RUN_MAX	(1u << 20)

static int run(int fd, unsigned int bsz, blk64_t blk, unsigned int n,
	       unsigned char *buf)
{
	off_t off = (off_t)blk * bsz;
	size_t len = (size_t)n * bsz;

	if (pread(fd, buf, len, off) != (ssize_t)len ||
	    pwrite(fd, buf, len, off) != (ssize_t)len) {
		perror("floor: I/O");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	ext2_filsys fs;
	unsigned char *buf;
	blk64_t start = 0;
	unsigned int len = 0, ipg, ipb, bsz, chunk;
	int fd;

	if (argc != 2 || ext2fs_open(argv[1], 0, 0, 0, unix_io_manager, &fs) ||
	    ext2fs_read_inode_bitmap(fs))
		return fprintf(stderr, "usage: floor IMAGE (an ext4 image)\n"), 2;
	fd = open(argv[1], O_RDWR);
	bsz = fs->blocksize;
	ipg = fs->super->s_inodes_per_group;
	ipb = bsz / EXT2_INODE_SIZE(fs->super);
	chunk = RUN_MAX / bsz;
	buf = malloc(RUN_MAX);
	if (fd < 0 || !buf)
		return perror("floor"), 1;
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		unsigned int used = 0, n;
		blk64_t t = ext2fs_inode_table_loc(fs, g);

		for (unsigned int i = ipg; i > 0; i--)
			if (ext2fs_test_inode_bitmap2(fs->inode_map, (ext2_ino_t)g * ipg + i)) {
				used = i;
				break;
			}
		n = (used + ipb - 1) / ipb;
		/* Adjacent tables (flex_bg) are merged into one run, as shiftimg does. */
		while (n) {
			unsigned int take;

			if (len && start + len == t && len < chunk) {
				take = n < chunk - len ? n : chunk - len;
				len += take;
			} else {
				if (len && run(fd, bsz, start, len, buf))
					return 1;
				take = n < chunk ? n : chunk;
				start = t;
				len = take;
			}
			t += take;
			n -= take;
		}
	}
	if ((len && run(fd, bsz, start, len, buf)) || fsync(fd))
		return perror("floor"), 1;
	close(fd);
	ext2fs_close(fs);
	return 0;
}
