// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Finding, checking and opening an ext2/3/4 image before a run: the
 * probe, --offset, the open through the journal's io_manager, the
 * superblock and group descriptor states a run refuses, whether the
 * image (or a loop device on it) is mounted or held, and the copy that
 * -o OUT shifts instead of the image.  Every refusal here comes before
 * anything is read for the shift, let alone written.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <et/com_err.h>

#include "ext4.h"
#include "journal.h"
#include "le.h"

/* ---- probing and opening ---- */

static bool looks_partitioned(const unsigned char *b)
{
	return (b[510] == 0x55 && b[511] == 0xaa) || !memcmp(b + 512, "EFI PART", 8);
}

/* A superblock at 1024, or a partition table (for --offset). */
bool e4_probe(const struct si_target *t)
{
	unsigned char b[2048];

	if (t->fd < 0 || !(S_ISREG(t->st.st_mode) || S_ISBLK(t->st.st_mode)))
		return false;
	if (pread(t->fd, b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return false;
	if (get16(b + 1024 + 56) == EXT2_SUPER_MAGIC)
		return true;
	return looks_partitioned(b);
}

static int parse_offset(struct e4_ctx *c, uint64_t *off)
{
	const char *s = si_option(c->h, "offset");
	char *end;

	*off = 0;
	if (!s)
		return 0;
	errno = 0;
	*off = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-')
		return si_error(c->h, EINVAL, "%s: --offset '%s': expected a byte count",
				c->name, s);
	return 0;
}

/*
 * Opens the filesystem through the descriptor the driver checked, so a
 * rename of the path in between cannot swap the image.
 */
int e4_open_fs(struct e4_ctx *c, int fd, bool rw, bool blockdev)
{
	char path[64], opts[64] = "";
	uint64_t off;
	int flags = EXT2_FLAG_64BITS;
	errcode_t err;

	if (parse_offset(c, &off) < 0)
		return -EINVAL;
	c->fd = fd;
	c->offset = off;
	if (off)
		snprintf(opts, sizeof(opts), "offset=%" PRIu64, off);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (rw)
		flags |= EXT2_FLAG_RW | (blockdev ? EXT2_FLAG_EXCLUSIVE : 0);
	err = ext2fs_open2(path, opts, flags, 0, 0, si_journal_io_manager(), &c->fs);
	if (err == EXT2_ET_BAD_MAGIC && !off)
		return si_error(c->h, EINVAL,
				"%s: no ext2/3/4 superblock at the start; for a partitioned disk give --offset BYTES",
				c->name);
	if (err)
		return e4_fail(c, err, "opening the filesystem");
	/*
	 * When the superblock is written (EA blocks allocated for spilled
	 * values), libext2fs stamps s_wtime with fs->now or the clock: the
	 * image's own time keeps a run, and a run redone after a crash,
	 * giving the same bytes.
	 */
	c->fs->now = (time_t)c->fs->super->s_wtime |
		     (time_t)c->fs->super->s_wtime_hi << 32;
	c->isz = EXT2_INODE_SIZE(c->fs->super);
	c->bsz = c->fs->blocksize;
	c->csum = ext2fs_has_feature_metadata_csum(c->fs->super);
	c->seed = c->fs->csum_seed;
	return 0;
}

int e4_refuse(struct e4_ctx *c, int err, const char *why)
{
	return si_error(c->h, err, "%s: %s; nothing was changed", c->name, why);
}

/* The states in which rewriting metadata behind the kernel's back is unsafe. */
int e4_check_super(struct e4_ctx *c)
{
	struct ext2_super_block *sb = c->fs->super;
	dgrp_t g;

	if (sb->s_creator_os != EXT2_OS_LINUX)
		return e4_refuse(c, ENOTSUP,
				 "created by a non-Linux system, whose inodes keep the high uid/gid bits elsewhere");
	if (ext2fs_has_feature_journal_needs_recovery(sb))
		return e4_refuse(c, EUCLEAN, "the journal needs recovery (run e2fsck first)");
	if (sb->s_last_orphan || ext2fs_has_feature_orphan_present(sb))
		return e4_refuse(c, EUCLEAN, "it has orphan inodes (run e2fsck first)");
	if (sb->s_state & EXT2_ERROR_FS)
		return e4_refuse(c, EUCLEAN, "it is marked with errors (run e2fsck first)");
	if (!(sb->s_state & EXT2_VALID_FS))
		return e4_refuse(c, EUCLEAN, "it was not cleanly unmounted (run e2fsck first)");
	if (ext2fs_has_feature_journal_dev(sb))
		return e4_refuse(c, ENOTSUP, "it is an external journal, not a filesystem");
	if (ext2fs_has_group_desc_csum(c->fs))
		for (g = 0; g < c->fs->group_desc_count; g++)
			if (!ext2fs_group_desc_csum_verify(c->fs, g))
				return si_error(c->h, EUCLEAN,
						"%s: group %u: descriptor checksum does not match; nothing was changed",
						c->name, g);
	return 0;
}

int e4_check_desc(struct e4_ctx *c)
{
	errcode_t err = ext2fs_check_desc(c->fs);

	if (err)
		return si_error(c->h, EUCLEAN,
				"%s: group descriptors: %s; nothing was changed",
				c->name, error_message(err));
	return 0;
}

/* ---- is it mounted? ---- */

static bool same_file(const char *path, const struct stat *want)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return false;
	if (S_ISBLK(want->st_mode))
		return S_ISBLK(st.st_mode) && st.st_rdev == want->st_rdev;
	return st.st_dev == want->st_dev && st.st_ino == want->st_ino;
}

/* Decodes the octal escapes of /proc/self/mountinfo fields in place. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] && s[3]) {
			*o++ = (char)(((s[1] - '0') << 6) | ((s[2] - '0') << 3) |
				      (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/*
 * Finds a mount of device devs[0..n) or of the image itself (as a
 * source path, as fuse2fs shows it); returns its mount point or NULL.
 */
static char *find_mount(const dev_t *devs, size_t n, const struct stat *img)
{
	char *line = NULL, *found = NULL;
	size_t cap = 0;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return NULL;
	while (!found && getline(&line, &cap, f) > 0) {
		unsigned int maj, min;
		char mnt[4096], src[4096], *sep;

		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, mnt) != 3)
			continue;
		for (size_t i = 0; i < n; i++)
			if (makedev(maj, min) == devs[i])
				found = strdup(mnt);
		sep = strstr(line, " - ");
		if (!found && sep && sscanf(sep, " - %*s %4095s", src) == 1 &&
		    src[0] == '/') {
			unescape(src);
			if (same_file(src, img))
				found = strdup(mnt);
		}
	}
	free(line);
	fclose(f);
	if (found)
		unescape(found);
	return found;
}

static bool read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = fgets(buf, (int)size, f) != NULL;
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

static bool read_dev(const char *path, dev_t *dev)
{
	unsigned int maj, min;
	char buf[64];

	if (!read_line(path, buf, sizeof(buf)) || sscanf(buf, "%u:%u", &maj, &min) != 2)
		return false;
	*dev = makedev(maj, min);
	return true;
}

/*
 * Is the block device held exclusively, as a mounted filesystem holds
 * it?  A mount in another mount namespace (one a container or a test
 * copied) is in no mountinfo this process can read.
 */
static bool dev_busy(const char *name)
{
	char path[300];
	int fd;

	snprintf(path, sizeof(path), "/dev/%s", name);
	fd = open(path, O_RDONLY | O_EXCL | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	return fd < 0 && errno == EBUSY;
}

/*
 * Collects the loop devices backed by the image, and their partitions;
 * busy gets the name of one the kernel holds ("" if none).
 */
static size_t loop_devices(const struct stat *img, dev_t *devs, size_t max,
			   char *busy, size_t size)
{
	char path[1024], back[4096];
	struct dirent *de;
	size_t n = 0;
	DIR *d = opendir("/sys/block");

	if (!d)
		return 0;
	while (n < max && (de = readdir(d))) {
		const char *name = de->d_name;
		char *del;

		if (strncmp(name, "loop", 4))
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", name);
		if (!read_line(path, back, sizeof(back)))
			continue;
		del = strstr(back, " (deleted)");
		if (del)
			*del = '\0';
		if (!same_file(back, img))
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/dev", name);
		if (read_dev(path, &devs[n]))
			n++;
		if (!*busy && dev_busy(name))
			snprintf(busy, size, "%s", name);
		for (int p = 1; p < 64 && n < max; p++) {
			char part[300];

			snprintf(part, sizeof(part), "%sp%d", name, p);
			snprintf(path, sizeof(path), "/sys/block/%s/%s/dev", name, part);
			if (!read_dev(path, &devs[n]))
				continue;
			n++;
			if (!*busy && dev_busy(part))
				snprintf(busy, size, "%s", part);
		}
	}
	closedir(d);
	return n;
}

int e4_check_mounted(struct e4_ctx *c, const struct si_target *t)
{
	dev_t devs[64];
	size_t n = 0;
	char *mnt, busy[300] = "";

	if (S_ISBLK(t->st.st_mode)) {
		/* An exclusive open fails while the kernel holds the device. */
		int fd = open(t->path, O_RDONLY | O_EXCL | O_CLOEXEC);

		if (fd < 0 && errno == EBUSY)
			return e4_refuse(c, EBUSY, "the device is in use (mounted or held)");
		if (fd >= 0)
			close(fd);
		devs[n++] = t->st.st_rdev;
	} else {
		n = loop_devices(&t->st, devs, sizeof(devs) / sizeof(devs[0]),
				 busy, sizeof(busy));
	}
	mnt = find_mount(devs, n, &t->st);
	if (mnt) {
		int err = si_error(c->h, EBUSY, "%s: mounted on %s; unmount it first; nothing was changed",
				   c->name, mnt);

		free(mnt);
		return err;
	}
	if (*busy)
		return si_error(c->h, EBUSY,
				"%s: /dev/%s, a loop device on it, is in use (mounted, perhaps in another mount namespace); nothing was changed",
				c->name, busy);
	return 0;
}

/* ---- the copy for -o OUT ---- */

/* Copies the data regions only, so a sparse image stays sparse. */
static int copy_sparse(struct e4_ctx *c, int in, int out, off_t size)
{
	off_t pos = 0;

	while (pos < size) {
		off_t data = lseek(in, pos, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0) {
			/* No SEEK_DATA (a block device): everything is data. */
			data = pos;
			hole = size;
		} else {
			hole = lseek(in, data, SEEK_HOLE);
			if (hole < 0)
				hole = size;
		}
		for (off_t at = data; at < hole;) {
			loff_t from = at, to = at;
			ssize_t n = copy_file_range(in, &from, out, &to, (size_t)(hole - at), 0);

			if (n <= 0) {
				if (n < 0 && (errno == EXDEV || errno == ENOSYS ||
					      errno == EINVAL || errno == EOPNOTSUPP))
					n = 0;
				else if (n < 0)
					return si_error(c->h, errno, "%s: copying: %s",
							c->name, strerror(errno));
				/* Fall back to plain read and write. */
				char buf[1 << 16];
				ssize_t r = pread(in, buf, sizeof(buf) < (size_t)(hole - at) ?
						  sizeof(buf) : (size_t)(hole - at), at);

				if (r <= 0 || pwrite(out, buf, (size_t)r, at) != r)
					return si_error(c->h, r < 0 ? errno : EIO,
							"%s: copying failed", c->name);
				n = r;
			}
			at += n;
		}
		pos = hole;
	}
	if (ftruncate(out, size) < 0)
		return si_error(c->h, errno, "%s: %s", c->name, strerror(errno));
	return 0;
}

static off_t target_size(const struct si_target *t)
{
	uint64_t sz = 0;

	if (S_ISBLK(t->st.st_mode))
		return ioctl(t->fd, BLKGETSIZE64, &sz) < 0 ? -1 : (off_t)sz;
	return t->st.st_size;
}

/* Makes OUT.tmp, a copy of the target (a reflink where possible). */
int e4_make_copy(struct e4_ctx *c, const struct si_target *t,
		 const char *out, char **tmpp, int *fdp)
{
	char *tmp;
	int fd, err;
	off_t size = target_size(t);

	if (size < 0)
		return si_error(c->h, errno, "%s: %s", c->name, strerror(errno));
	if (asprintf(&tmp, "%s.shiftimg-tmp", out) < 0)
		return si_error(c->h, ENOMEM, "%s: out of memory", c->name);
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, t->st.st_mode & 0666);
	if (fd < 0) {
		err = si_error(c->h, errno, "%s: %s", tmp, strerror(errno));
		free(tmp);
		return err;
	}
	err = 0;
	if (!S_ISREG(t->st.st_mode) || ioctl(fd, FICLONE, t->fd) < 0)
		err = copy_sparse(c, t->fd, fd, size);
	if (err) {
		close(fd);
		unlink(tmp);
		free(tmp);
		return err;
	}
	*tmpp = tmp;
	*fdp = fd;
	return 0;
}
