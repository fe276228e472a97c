// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The "already shifted" stamp, kept in the target so that it travels
 * with it (shiftimg-journal(5)):
 *
 * - a tree: the xattr trusted.shiftimg.map on its root directory, whose
 *   value is the map as shiftimg_map_format() writes it.  trusted.*
 *   is invisible inside a user namespace, so containers never see it.
 * - an ext4 image: 16 bytes at the end of the superblock's reserved
 *   area (bytes 1004-1019 of the superblock, just before s_checksum):
 *   "SIMP", a little-endian version (1), and the XXH64 of the map text.
 *   The superblock checksum is recomputed when metadata_csum is on.
 *   Neither the kernel nor e2fsck reads these bytes.
 *
 * Which stamps a run accepts and leaves is decided here too, for every
 * backend that keeps one (si_stamp_texts(), si_stamp_judge()).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <ext2fs/ext2fs.h>

#include "journal.h"

#define STAMP_XATTR	"trusted.shiftimg.map"
#define SB_OFFSET	1024
#define SB_SIZE		1024
#define SB_STAMP	1004
#define SB_CSUM		1020
#define SB_RO_COMPAT	0x64
#define RO_COMPAT_CSUM	0x400
#define STAMP_MAGIC	"SIMP"

static int tree_get(const struct si_target *t, char *buf, size_t size)
{
	ssize_t n = fgetxattr(t->fd, STAMP_XATTR, buf, size - 1);

	if (n < 0) {
		buf[0] = '\0';
		return errno == ENODATA || errno == ENOTSUP ? 0 : -errno;
	}
	buf[n] = '\0';
	return 0;
}

static int tree_set(const struct si_target *t, const char *value)
{
	int ret;

	if (!value[0]) {
		ret = fremovexattr(t->fd, STAMP_XATTR);
		if (ret < 0 && errno == ENODATA)
			ret = 0;
	} else {
		ret = fsetxattr(t->fd, STAMP_XATTR, value, strlen(value), 0);
	}
	if (ret < 0)
		return -errno;
	return 1;
}

static int sb_read(int fd, uint64_t offset, unsigned char *sb)
{
	ssize_t n = pread(fd, sb, SB_SIZE, (off_t)(offset + SB_OFFSET));

	if (n != SB_SIZE)
		return n < 0 ? -errno : -EIO;
	return 0;
}

static int ext4_get(const struct si_target *t, uint64_t offset, char *buf,
		    size_t size)
{
	unsigned char sb[SB_SIZE];
	uint64_t digest;
	int err = sb_read(t->fd, offset, sb);

	buf[0] = '\0';
	if (err)
		return err;
	if (memcmp(sb + SB_STAMP, STAMP_MAGIC, 4))
		return 0;
	memcpy(&digest, sb + SB_STAMP + 8, 8);
	snprintf(buf, size, "xxh64:%016" PRIx64, le64toh(digest));
	return 0;
}

/*
 * Writes the stamp through a descriptor of the same file opened for
 * writing; an fsync() of the target's own descriptor covers it.
 */
static int ext4_set(const struct si_target *t, uint64_t offset, const char *value)
{
	unsigned char sb[SB_SIZE], want[16];
	char proc[64];
	uint64_t digest = 0;
	uint32_t ro, csum;
	int fd, err;

	if (value[0] && sscanf(value, "xxh64:%" SCNx64, &digest) != 1)
		return -EINVAL;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", t->fd);
	fd = open(proc, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = sb_read(fd, offset, sb);
	if (err)
		goto out_close;
	memset(want, 0, sizeof(want));
	if (value[0]) {
		uint32_t version = htole32(1);

		digest = htole64(digest);
		memcpy(want, STAMP_MAGIC, 4);
		memcpy(want + 4, &version, 4);
		memcpy(want + 8, &digest, 8);
	}
	/* Unchanged: leave the superblock (and its checksum) alone. */
	if (!memcmp(sb + SB_STAMP, want, sizeof(want)))
		goto out_close;
	err = 1;
	memcpy(sb + SB_STAMP, want, sizeof(want));
	memcpy(&ro, sb + SB_RO_COMPAT, 4);
	if (le32toh(ro) & RO_COMPAT_CSUM) {
		csum = htole32(ext2fs_crc32c_le(~0u, sb, SB_CSUM));
		memcpy(sb + SB_CSUM, &csum, 4);
	}
	si_fault(SI_FAULT_WRITE);
	if (pwrite(fd, sb, SB_SIZE, (off_t)(offset + SB_OFFSET)) != SB_SIZE)
		err = errno ? -errno : -EIO;
out_close:
	close(fd);
	return err;
}

int si_stamp_get(const struct si_backend *b, const struct si_target *t,
		 uint64_t offset, char *buf, size_t size)
{
	if (b == &si_tree_backend)
		return tree_get(t, buf, size);
	return ext4_get(t, offset, buf, size);
}

int si_stamp_set(const struct si_backend *b, const struct si_target *t,
		 uint64_t offset, const char *value)
{
	if (b == &si_tree_backend)
		return tree_set(t, value);
	return ext4_set(t, offset, value);
}

static char *format_map(const struct shiftimg *h, unsigned int which)
{
	int n = shiftimg_map_format(h, which, NULL, 0);
	char *s = malloc((size_t)n + 1);

	if (s)
		shiftimg_map_format(h, which, s, (size_t)n + 1);
	return s;
}

int si_stamp_texts(const struct shiftimg *h, char **from, char **to)
{
	bool reverse = h->flags & SHIFTIMG_REVERSE;
	char *given = format_map(h, 0);
	char *old = h->have_from[0] || h->have_from[1] ?
		    format_map(h, SHIFTIMG_FROM) : strdup("");

	if (!given || !old) {
		free(given);
		free(old);
		return -ENOMEM;
	}
	/* --reverse goes back from the map given to the one before it. */
	*from = reverse ? given : old;
	*to = reverse ? old : given;
	return 0;
}

int si_stamp_judge(struct shiftimg *h, const char *target, const char *old,
		   const char *from, const char *to)
{
	if (!(h->flags & SHIFTIMG_STAMP) || (h->flags & SHIFTIMG_FORCE))
		return 0;
	if (to[0] && !strcmp(old, to)) {
		snprintf(h->notice, sizeof(h->notice),
			 "%s: already shifted with this map (stamp %s); nothing done (--force shifts again)",
			 target, old);
		return SI_STAMP_DONE;
	}
	if (!old[0] || !strcmp(old, from))
		return 0;
	if (from[0])
		return si_error(h, EEXIST, "%s: stamped as shifted with %s, not with the map it is to be shifted from (%s); refusing (--force overrides)",
				target, old, from);
	return si_error(h, EEXIST, "%s: already shifted with another map (stamp %s); refusing to shift it again (--force overrides)",
			target, old);
}
