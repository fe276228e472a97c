// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The physical floor of a tree shift: a bare walk that does only
 * fstatat + fchownat per entry (no xattrs, no checks), on N threads,
 * each taking whole top-level directories.
 *
 *   floor THREADS DELTA DIR     adds DELTA (may be negative) to every id
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static long delta;
static int rootfd;
static char **tops;
static size_t nr_tops;
static atomic_size_t next;

static void walk(int dfd)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		struct stat st;

		if (e->d_name[0] == '.' && (!e->d_name[1] ||
		    (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		fchownat(dfd, e->d_name, (uid_t)(st.st_uid + delta),
			 (gid_t)(st.st_gid + delta), AT_SYMLINK_NOFOLLOW);
		if (S_ISDIR(st.st_mode)) {
			int fd = openat(dfd, e->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW);

			if (fd >= 0)
				walk(fd);
		}
	}
	closedir(d);
}

static void *worker(void *arg)
{
	size_t i;

	while ((i = next++) < nr_tops) {
		struct stat st;
		int fd;

		if (fstatat(rootfd, tops[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		fchownat(rootfd, tops[i], (uid_t)(st.st_uid + delta),
			 (gid_t)(st.st_gid + delta), AT_SYMLINK_NOFOLLOW);
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
	DIR *d;
	int n, i;

	if (argc != 4)
		return 2;
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
	for (i = 0; i < n; i++)
		pthread_create(&tid[i], NULL, worker, NULL);
	for (i = 0; i < n; i++)
		pthread_join(tid[i], NULL);
	return 0;
}
