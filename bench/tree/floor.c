// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The physical floor of a tree shift: a bare walk that does only
 * fstatat + fchownat per entry (no xattrs, no checks), on N threads,
 * each taking whole top-level directories.
 *
 *   floor THREADS DELTA DIR [OPS]
 *
 * adds DELTA (may be negative) to every id.  OPS (default "sc") is the
 * syscall mix per entry, to price each call the way shiftimg makes it:
 *   s  fstatat                  x  statx (shiftimg's mask)
 *   l  llistxattr by name, from a working directory fchdir'ed to the parent
 *   c  fchownat (needs a stat first)
 * e.g. "s" is a bare stat walk, "xl" a check pass that lists every
 * inode's xattrs, "xlc" a one-pass shift without xattrs.  A second pass
 * after a slash, "C", walks again and chowns each entry by the ids the
 * first pass kept in memory, without a stat: "xl/C" is the floor of any
 * design that must look at everything before it changes anything, as
 * shiftimg's default run must (--unmapped=fail), and "x/C" that of one
 * that knows without a listing which inodes have no xattrs, as shiftimg
 * does on ext4 from the inode tables (src/inotab.c).  The second pass
 * finds every inode gone from the CPU's caches again, so a chown there
 * costs more than after a stat of the same entry.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

static long delta;
static char *ops = "sc";
static int rootfd;
static char **tops;
static size_t nr_tops;
static atomic_size_t next;

/*
 * What the first pass saw of each entry, per top-level directory, in
 * walk order: uid, gid, and whether it is a file with other names.
 */
struct ids {
	uint32_t *v;
	size_t n, cap, pos;
};
static struct ids *kept;
static __thread struct ids *mine;
static bool keeping;		/* the first of two passes */

static void keep(const struct stat *st)
{
	if (mine->n + 3 > mine->cap) {
		mine->cap = mine->cap ? 2 * mine->cap : 4096;
		mine->v = realloc(mine->v, mine->cap * sizeof(*mine->v));
		if (!mine->v)
			abort();
	}
	mine->v[mine->n++] = st->st_uid;
	mine->v[mine->n++] = st->st_gid;
	mine->v[mine->n++] = !S_ISDIR(st->st_mode) && st->st_nlink > 1;
}

/* The OPS of one entry; 0, or -1 if it could not be stat'ed. */
static int entry(int dfd, const char *name, struct stat *st)
{
	const char *op;
	struct statx sx;
	char list[1024];

	for (op = ops; *op; op++) {
		switch (*op) {
		case 's':
			if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
				return -1;
			break;
		case 'x':
			if (statx(dfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
				  STATX_TYPE | STATX_MODE | STATX_UID | STATX_GID |
				  STATX_INO | STATX_NLINK | STATX_MNT_ID, &sx) < 0)
				return -1;
			st->st_mode = sx.stx_mode;
			st->st_uid = sx.stx_uid;
			st->st_gid = sx.stx_gid;
			st->st_nlink = sx.stx_nlink;
			break;
		case 'l':
			llistxattr(name, list, sizeof(list));
			break;
		case 'C':
			if (mine->pos + 3 > mine->n)
				abort();	/* the tree changed between passes */
			st->st_uid = mine->v[mine->pos];
			st->st_gid = mine->v[mine->pos + 1];
			mine->pos += 3;
			/*
			 * A hard link's other name may have moved it since:
			 * as in one pass, it moves from where it is now, so
			 * that every mix leaves the ids where "sc" does.
			 */
			if (mine->v[mine->pos - 1] &&
			    fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
				return -1;
			/* fall through */
		case 'c':
			fchownat(dfd, name, (uid_t)(st->st_uid + delta),
				 (gid_t)(st->st_gid + delta), AT_SYMLINK_NOFOLLOW);
			break;
		}
	}
	if (keeping)
		keep(st);
	return 0;
}

static void walk(int dfd)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;

	if (!d)
		return;
	if (strchr(ops, 'l'))
		fchdir(dfd);
	while ((e = readdir(d))) {
		struct stat st;

		if (e->d_name[0] == '.' && (!e->d_name[1] ||
		    (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		st.st_mode = DTTOIF(e->d_type);	/* "C" makes no stat */
		if (entry(dfd, e->d_name, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int fd = openat(dfd, e->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW);

			if (fd >= 0)
				walk(fd);
			if (strchr(ops, 'l'))
				fchdir(dfd);
		}
	}
	closedir(d);
}

static void *worker(void *arg)
{
	size_t i;

	unshare(CLONE_FS);	/* a working directory of its own */
	while ((i = next++) < nr_tops) {
		struct stat st;
		int fd;

		fchdir(rootfd);
		mine = kept ? &kept[i] : NULL;
		st.st_mode = S_IFDIR;
		if (entry(rootfd, tops[i], &st) < 0)
			continue;
		if (!S_ISDIR(st.st_mode))
			continue;
		fd = openat(rootfd, tops[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
		if (fd >= 0)
			walk(fd);
	}
	return arg;
}

int main(int argc, char **argv)
{
	pthread_t tid[64];
	struct dirent *e;
	char *second;
	DIR *d;
	int n, i;

	if (argc != 4 && argc != 5)
		return 2;
	if (argc == 5)
		ops = argv[4];
	n = atoi(argv[1]);
	delta = atol(argv[2]);
	if (n < 1 || n > 64)
		return 2;
	rootfd = open(argv[3], O_RDONLY | O_DIRECTORY);
	d = opendir(argv[3]);
	if (rootfd < 0 || !d)
		return 1;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		tops = realloc(tops, (nr_tops + 1) * sizeof(*tops));
		tops[nr_tops++] = strdup(e->d_name);
	}
	closedir(d);
	second = strchr(ops, '/');
	if (second) {
		*second++ = '\0';
		kept = calloc(nr_tops, sizeof(*kept));
		if (!kept)
			return 1;
		keeping = true;
	}
	for (;;) {
		for (i = 0; i < n; i++)
			pthread_create(&tid[i], NULL, worker, NULL);
		for (i = 0; i < n; i++)
			pthread_join(tid[i], NULL);
		if (!second)
			return 0;
		ops = second;
		second = NULL;
		keeping = false;
		next = 0;
	}
}
