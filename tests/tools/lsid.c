// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * lsid: a canonical listing of a tree's ownership, for comparisons.
 *
 *   lsid [--no-override-stat] [--no-times] DIR
 *
 * One line per object, sorted by path: path, type, mode, uid, gid,
 * size (regular files), rdev (devices), link target, mtime, the first
 * path of its hard-link group; then one indented line per xattr, with
 * POSIX ACLs and security.capability decoded (numeric ids) and other
 * values in hex; shiftimg's stamp (trusted.shiftimg.*) is left out.
 * Works at any depth: every name is relative to its directory (the
 * walk fchdir()s), nothing is followed.
 */
#include <dirent.h>
#include <stdarg.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

struct line {
	char *path;
	char *text;
	dev_t dev;
	ino_t ino;
	nlink_t nlink;
};

static struct line *lines;
static size_t nr, cap;
static bool no_override, no_times;
static dev_t root_dev;

static void die(const char *what, const char *path)
{
	fprintf(stderr, "lsid: %s: %s: %s\n", path, what, strerror(errno));
	exit(1);
}

/* A growing string. */
struct buf {
	char *s;
	size_t len, cap;
};

static void bprintf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void bprintf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if ((size_t)n < b->cap - b->len)
			break;
		b->cap = b->cap * 2 + (size_t)n + 64;
		b->s = realloc(b->s, b->cap);
		if (!b->s)
			exit(1);
	}
	b->len += (size_t)n;
}

static uint32_t le32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static void acl(struct buf *b, const unsigned char *v, ssize_t n)
{
	ssize_t off;

	if (n < 4 || (n - 4) % 8 || le32(v) != 2) {
		bprintf(b, "malformed-acl");
		return;
	}
	for (off = 4; off < n; off += 8) {
		unsigned int tag = v[off] | v[off + 1] << 8;
		unsigned int perm = v[off + 2] | v[off + 3] << 8;
		const char *t = tag == 1 ? "u::" : tag == 2 ? "u" : tag == 4 ? "g::" :
				tag == 8 ? "g" : tag == 0x10 ? "m::" : tag == 0x20 ? "o::" : "?";

		bprintf(b, "%s%s", off > 4 ? "," : "", t);
		if (tag == 2 || tag == 8)
			bprintf(b, ":%u:", le32(v + off + 4));
		bprintf(b, "%c%c%c", perm & 4 ? 'r' : '-', perm & 2 ? 'w' : '-',
			perm & 1 ? 'x' : '-');
	}
}

static void cap_value(struct buf *b, const unsigned char *v, ssize_t n)
{
	uint32_t magic = n >= 4 ? le32(v) : 0;

	if ((magic >> 24) == 2 && n == 20)
		bprintf(b, "v2");
	else if ((magic >> 24) == 3 && n == 24)
		bprintf(b, "v3 rootid=%u", le32(v + 20));
	else {
		bprintf(b, "malformed-cap");
		return;
	}
	bprintf(b, " eff=%u perm=%08x%08x inh=%08x%08x", magic & 1,
		le32(v + 12), le32(v + 4), le32(v + 16), le32(v + 8));
}

static void xattrs(struct buf *b, const char *name, bool islink)
{
	char list[65536];
	unsigned char val[65536];
	ssize_t len, off, n;
	char *names[256];
	int k = 0, i, j;

	len = llistxattr(name, list, sizeof(list));
	if (len < 0)
		return;
	for (off = 0; off < len && k < 256; off += (ssize_t)strlen(list + off) + 1)
		names[k++] = list + off;
	for (i = 1; i < k; i++)		/* insertion sort: lists are short */
		for (j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char *t = names[j];

			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	for (i = 0; i < k; i++) {
		if (no_override && !strcmp(names[i], "user.containers.override_stat"))
			continue;
		/* shiftimg's own stamp (shiftimg-journal(5)) is not content. */
		if (!strncmp(names[i], "trusted.shiftimg.", 17))
			continue;
		n = lgetxattr(name, names[i], val, sizeof(val));
		bprintf(b, "\n  %s=", names[i]);
		if (n < 0) {
			bprintf(b, "error:%s", strerror(errno));
			continue;
		}
		if (!strncmp(names[i], "system.posix_acl_", 17))
			acl(b, val, n);
		else if (!strcmp(names[i], "security.capability"))
			cap_value(b, val, n);
		else if (!strcmp(names[i], "user.containers.override_stat"))
			bprintf(b, "%.*s", (int)n, (char *)val);
		else
			for (j = 0; j < n; j++)
				bprintf(b, "%02x", val[j]);
	}
	(void)islink;
}

static char type_of(mode_t m)
{
	return S_ISREG(m) ? 'f' : S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' :
	       S_ISCHR(m) ? 'c' : S_ISBLK(m) ? 'b' : S_ISFIFO(m) ? 'p' : 's';
}

static void record(const char *path, const char *name, const struct stat *st)
{
	struct buf b = { 0 };

	bprintf(&b, "%s %c %04o %u %u", path, type_of(st->st_mode),
		(unsigned int)(st->st_mode & 07777), (unsigned int)st->st_uid,
		(unsigned int)st->st_gid);
	if (S_ISREG(st->st_mode))
		bprintf(&b, " size=%lld", (long long)st->st_size);
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
		bprintf(&b, " rdev=%u,%u", major(st->st_rdev), minor(st->st_rdev));
	if (S_ISLNK(st->st_mode)) {
		char target[4096];
		ssize_t n = readlink(name, target, sizeof(target) - 1);

		if (n >= 0) {
			target[n] = '\0';
			bprintf(&b, " -> %s", target);
		}
	}
	if (!no_times && !S_ISLNK(st->st_mode))
		bprintf(&b, " mtime=%lld.%09ld", (long long)st->st_mtim.tv_sec,
			st->st_mtim.tv_nsec);
	if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) {
		int fd = open(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
		unsigned int fl = 0;

		if (fd >= 0 && ioctl(fd, FS_IOC_GETFLAGS, &fl) == 0 &&
		    (fl & (FS_IMMUTABLE_FL | FS_APPEND_FL)))
			bprintf(&b, " flags=%s%s", fl & FS_IMMUTABLE_FL ? "i" : "",
				fl & FS_APPEND_FL ? "a" : "");
		if (fd >= 0)
			close(fd);
	}
	xattrs(&b, name, S_ISLNK(st->st_mode));
	if (nr == cap) {
		cap = cap ? cap * 2 : 1024;
		lines = realloc(lines, cap * sizeof(*lines));
		if (!lines)
			exit(1);
	}
	lines[nr++] = (struct line){ strdup(path), b.s, st->st_dev, st->st_ino,
				     st->st_nlink };
}

static void walk(const char *path)
{
	DIR *d = opendir(".");
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, i;

	if (!d)
		die("opendir", path);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		names = realloc(names, (n + 1) * sizeof(*names));
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	for (i = 0; i < n; i++) {
		struct stat st;
		size_t len = strlen(path) + strlen(names[i]) + 2;
		char *child = malloc(len);

		snprintf(child, len, "%s/%s", path, names[i]);
		if (lstat(names[i], &st) < 0)
			die("lstat", child);
		record(child, names[i], &st);
		/* Like the walk it checks, the listing stays on one mount. */
		if (S_ISDIR(st.st_mode) && st.st_dev == root_dev) {
			int here = open(".", O_RDONLY | O_DIRECTORY);

			if (chdir(names[i]) < 0)
				die("chdir", child);
			walk(child);
			if (fchdir(here) < 0)
				die("fchdir", path);
			close(here);
		}
		free(child);
		free(names[i]);
	}
	free(names);
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->path,
		      ((const struct line *)b)->path);
}

int main(int argc, char **argv)
{
	struct stat st;
	size_t i, j;
	int a = 1;

	for (; a < argc && argv[a][0] == '-'; a++) {
		if (!strcmp(argv[a], "--no-override-stat"))
			no_override = true;
		else if (!strcmp(argv[a], "--no-times"))
			no_times = true;
	}
	if (argc - a != 1) {
		fprintf(stderr, "usage: lsid [--no-override-stat] [--no-times] DIR\n");
		return 2;
	}
	if (chdir(argv[a]) < 0 || lstat(".", &st) < 0)
		die("chdir", argv[a]);
	root_dev = st.st_dev;
	record(".", ".", &st);
	walk(".");
	qsort(lines, nr, sizeof(*lines), by_path);
	for (i = 0; i < nr; i++) {
		const char *first = NULL;
		char *nl = strchr(lines[i].text, '\n');
		bool dir = lines[i].text[strlen(lines[i].path) + 1] == 'd';

		for (j = 0; j < i && lines[i].nlink > 1 && !dir; j++)
			if (lines[j].dev == lines[i].dev && lines[j].ino == lines[i].ino) {
				first = lines[j].path;
				break;
			}
		if (nl)
			*nl = '\0';
		printf("%s", lines[i].text);
		if (first)
			printf(" link=%s", first);
		printf("%s%s\n", nl ? "\n" : "", nl ? nl + 1 : "");
	}
	return 0;
}
