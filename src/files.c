// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Small files a run changes beside its target (a container's config, a
 * store's records): read whole, and written new beside the old one to
 * be renamed over it.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal.h"
#include "shiftimg-int.h"

/* Reads a small text file whole; NUL-terminated. */
int si_file_read(struct shiftimg *h, const char *path, size_t max, char **buf,
		 size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), err = 0;
	struct stat st;
	ssize_t n;

	*buf = NULL;
	if (fd < 0)
		return si_error(h, errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		err = si_error(h, EINVAL, "%s: not a regular file of at most %zu MiB", path,
			       max >> 20);
		goto out_close;
	}
	*buf = malloc((size_t)st.st_size + 1);
	if (!*buf) {
		err = si_error(h, ENOMEM, "out of memory");
		goto out_close;
	}
	n = pread(fd, *buf, (size_t)st.st_size, 0);
	if (n != st.st_size) {
		err = si_error(h, n < 0 ? errno : EIO, "%s: read: %s", path,
			       n < 0 ? strerror(errno) : "short read");
		free(*buf);
		*buf = NULL;
		goto out_close;
	}
	(*buf)[n] = '\0';
	*len = (size_t)n;
out_close:
	close(fd);
	return err;
}

/*
 * Their writes and syncs are fault points like the journal's
 * (SHIFTIMG_FAULT), so the tests can stop a run at each of them too.
 */
int si_dir_sync(struct shiftimg *h, const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;

	si_fault(SI_FAULT_SYNC);
	if (fd < 0 || fsync(fd) < 0)
		err = si_error(h, errno, "%s: fsync: %s", dir, strerror(errno));
	if (fd >= 0)
		close(fd);
	return err;
}

int si_file_write(struct shiftimg *h, const char *path, const char *buf,
		  size_t len, const struct stat *like)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		      like->st_mode & 07777), err = 0;

	if (fd < 0)
		return si_error(h, errno, "%s: %s", path, strerror(errno));
	si_fault(SI_FAULT_WRITE);
	if (fchown(fd, like->st_uid, like->st_gid) < 0 ||
	    fchmod(fd, like->st_mode & 07777) < 0 ||
	    write(fd, buf, len) != (ssize_t)len ||
	    (si_fault(SI_FAULT_SYNC), fsync(fd) < 0))
		err = si_error(h, errno ? errno : EIO, "%s: %s", path, strerror(errno ? errno : EIO));
	close(fd);
	if (err)
		unlink(path);
	return err;
}

/*
 * Puts old back as path.  rename(2) does nothing when both names are
 * links to one file (a run stopped between linking old and renaming
 * the new file over path): old is then only unlinked.
 */
int si_file_put_back(struct shiftimg *h, const char *old, const char *path)
{
	struct stat a, b;

	if (lstat(old, &a) == 0 && lstat(path, &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
		if (unlink(old) < 0)
			return si_error(h, errno, "%s: %s", old, strerror(errno));
		return 0;
	}
	if (rename(old, path) < 0)
		return si_error(h, errno, "%s: %s", path, strerror(errno));
	return 0;
}

int si_file_stage(struct shiftimg *h, const char *path, const char *next,
		  const char *old, const char *dir, const char *buf, size_t len,
		  const struct stat *like, size_t max)
{
	char *now;
	size_t now_len;
	bool same;
	int err;

	err = si_file_read(h, path, max, &now, &now_len);
	if (err)
		return err;
	same = now_len == len && !memcmp(now, buf, len);
	free(now);
	if (same)
		return 1;
	err = si_file_write(h, next, buf, len, like);
	if (!err)
		si_fault(SI_FAULT_WRITE);
	if (!err && link(path, old) < 0 && errno != EEXIST)
		err = si_error(h, errno, "%s: %s", old, strerror(errno));
	return err ? err : si_dir_sync(h, dir);
}
