// SPDX-License-Identifier: GPL-2.0-only
/* Helpers for the in-VM tests: checks, buffers, user namespaces, listings. */
#define _GNU_SOURCE
#include "vmtest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

int vt_failures;

bool vt_check(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", ok ? "ok" : "not ok");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!ok)
		vt_failures++;
	return ok;
}

void vt_die(const char *fmt, ...)
{
	va_list ap;

	printf("not ok - FATAL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" (%s)\n", strerror(errno));
	fflush(stdout);
	exit(2);
}

void vt_printf(struct vt_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			vt_die("vsnprintf");
		if ((size_t)n < room) {
			b->len += n;
			return;
		}
		b->cap = (b->cap + n + 1) * 2;
		b->s = realloc(b->s, b->cap);
		if (!b->s)
			vt_die("realloc");
	}
}

void vt_buf_free(struct vt_buf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}

int vt_log_rc(struct vt_buf *b, const char *what, int rc)
{
	if (rc < 0)
		vt_printf(b, "%s: %s\n", what, strerrorname_np(errno));
	else
		vt_printf(b, "%s: 0\n", what);
	return rc;
}

int vt_write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, data, len);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

char *vt_read_file(const char *path, size_t *len)
{
	struct vt_buf b = { 0 };
	char chunk[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	vt_printf(&b, "%s", "");
	while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
		if (b.len + n + 1 > b.cap) {
			b.cap = (b.len + n + 1) * 2;
			b.s = realloc(b.s, b.cap);
			if (!b.s)
				vt_die("realloc");
		}
		memcpy(b.s + b.len, chunk, n);
		b.len += n;
		b.s[b.len] = 0;
	}
	close(fd);
	if (len)
		*len = b.len;
	return b.s;
}

bool vt_file_is(const char *path, const char *want)
{
	size_t len;
	char *got = vt_read_file(path, &len);
	bool same = got && len == strlen(want) && !memcmp(got, want, len);

	free(got);
	return same;
}

static void write_proc(pid_t pid, const char *file, const char *text)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		vt_die("writing %s", path);
	close(fd);
}

static void wait_byte(int fd)
{
	char c;

	if (read(fd, &c, 1) != 1)
		vt_die("sync pipe");
}

static void send_byte(int fd)
{
	if (write(fd, "x", 1) != 1)
		vt_die("sync pipe");
}

/* In the child: become the namespace's root, with mounts of its own. */
static void become_container_root(bool own_mntns)
{
	if (setgroups(0, NULL) || setresgid(0, 0, 0) || setresuid(0, 0, 0))
		vt_die("becoming root in the user namespace");
	if (!own_mntns)
		return;
	if (unshare(CLONE_NEWNS))
		vt_die("unshare(CLONE_NEWNS)");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		vt_die("making / private");
}

int vt_in_userns(int (*fn)(void *), void *arg,
		 int (*before_go)(int userns_fd, void *), void *parg)
{
	return vt_in_userns_flags(0, fn, arg, before_go, parg);
}

int vt_in_userns_flags(unsigned int flags, int (*fn)(void *), void *arg,
		       int (*before_go)(int userns_fd, void *), void *parg)
{
	int up[2], down[2], status, fd, rc = 0;
	char map[64], path[64];
	pid_t pid;

	if (pipe2(up, O_CLOEXEC) || pipe2(down, O_CLOEXEC))
		vt_die("pipe");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		vt_die("fork");
	if (!pid) {
		if (unshare(CLONE_NEWUSER))
			vt_die("unshare(CLONE_NEWUSER)");
		send_byte(up[1]);
		wait_byte(down[0]);
		become_container_root(!(flags & VT_KEEP_MNTNS));
		fflush(stdout);
		_exit(fn(arg));
	}
	wait_byte(up[0]);
	snprintf(map, sizeof(map), "%u %u %u\n", VT_MAP_INSIDE,
		 VT_MAP_OUTSIDE, VT_MAP_COUNT);
	write_proc(pid, "uid_map", map);
	write_proc(pid, "gid_map", map);
	if (before_go) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			vt_die("%s", path);
		rc = before_go(fd, parg);
		close(fd);
	}
	if (rc)
		kill(pid, SIGKILL);
	send_byte(down[1]);
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	if (waitpid(pid, &status, 0) != pid)
		vt_die("waitpid");
	if (rc)
		return rc;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int vt_as_user(uid_t uid, gid_t gid, int (*fn)(void *), void *arg)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		vt_die("fork");
	if (!pid) {
		if (setgroups(0, NULL) || setresgid(gid, gid, gid) ||
		    setresuid(uid, uid, uid))
			_exit(111);
		_exit(fn(arg));
	}
	if (waitpid(pid, &status, 0) != pid)
		vt_die("waitpid");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- listings ---- */

static void list_acl(struct vt_buf *b, const char *path, const char *name,
		     const char *tag, unsigned int flags)
{
	unsigned char exact[1024], big[4096];
	ssize_t n, nbig;
	size_t i;

	n = lgetxattr(path, name, exact, 0);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(exact)) {
		vt_printf(b, " %s=toolong", tag);
		return;
	}
	n = lgetxattr(path, name, exact, n);
	/*
	 * A larger buffer must give the same value (a known shiftfs bug;
	 * 6.1's idmapped mounts have it too, so it is asked for).
	 */
	nbig = (flags & VT_LIST_BIGBUF) ?
	       lgetxattr(path, name, big, sizeof(big)) : n;
	if (nbig == n && n > 0 && !(flags & VT_LIST_BIGBUF))
		memcpy(big, exact, n);
	if (n < 0 || nbig != n || memcmp(exact, big, n)) {
		vt_printf(b, " %s=bigbuf-mismatch", tag);
		return;
	}
	vt_printf(b, " %s=", tag);
	for (i = 4; i + 8 <= (size_t)n; i += 8) {
		unsigned int etag = exact[i] | exact[i + 1] << 8;
		unsigned int perm = exact[i + 2] | exact[i + 3] << 8;
		uint32_t id = exact[i + 4] | exact[i + 5] << 8 |
			      exact[i + 6] << 16 | (uint32_t)exact[i + 7] << 24;
		const char *t = etag == 1 ? "u:" : etag == 2 ? "u" :
				etag == 4 ? "g:" : etag == 8 ? "g" :
				etag == 0x10 ? "m:" : etag == 0x20 ? "o:" : "?";

		if (etag == 2 || etag == 8)
			vt_printf(b, "%s:%u", t, id);
		else
			vt_printf(b, "%s", t);
		vt_printf(b, ":%c%c%c,", perm & 4 ? 'r' : '-',
			  perm & 2 ? 'w' : '-', perm & 1 ? 'x' : '-');
	}
}

static void list_cap(struct vt_buf *b, const char *path)
{
	unsigned char v[64];
	ssize_t n = lgetxattr(path, "security.capability", v, sizeof(v));
	uint32_t magic, perm, root = 0;

	if (n < 0) {
		if (errno != ENODATA && errno != EOPNOTSUPP)
			vt_printf(b, " cap=%s", strerrorname_np(errno));
		return;
	}
	if (n < 8) {
		vt_printf(b, " cap=short%zd", n);
		return;
	}
	magic = v[0] | v[1] << 8 | v[2] << 16 | (uint32_t)v[3] << 24;
	perm = v[4] | v[5] << 8 | v[6] << 16 | (uint32_t)v[7] << 24;
	if (n >= 24)
		root = v[20] | v[21] << 8 | v[22] << 16 |
		       (uint32_t)v[23] << 24;
	vt_printf(b, " cap=v%u,len%zd,perm%#x,eff%u", magic >> 24, n, perm,
		  magic & 1);
	if (n >= 24)
		vt_printf(b, ",root%u", root);
}

static void list_user_xattrs(struct vt_buf *b, const char *path)
{
	char names[4096], val[256];
	ssize_t n = llistxattr(path, names, sizeof(names)), v;
	char *p;

	for (p = names; n > 0 && p < names + n; p += strlen(p) + 1) {
		if (strncmp(p, "user.", 5))
			continue;
		v = lgetxattr(path, p, val, sizeof(val) - 1);
		val[v < 0 ? 0 : v] = 0;
		vt_printf(b, " %s=%s", p, val);
	}
}

static void list_one(struct vt_buf *b, const char *path, const char *rel,
		     unsigned int flags)
{
	char target[4096];
	struct stat st;
	ssize_t n;

	if (lstat(path, &st)) {
		vt_printf(b, "%s lstat:%s\n", rel, strerrorname_np(errno));
		return;
	}
	vt_printf(b, "%s %06o %u:%u", rel, st.st_mode, st.st_uid, st.st_gid);
	if (!S_ISDIR(st.st_mode))
		vt_printf(b, " n%lu s%lld", (unsigned long)st.st_nlink,
			  (long long)st.st_size);
	if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
		vt_printf(b, " dev%u:%u", major(st.st_rdev),
			  minor(st.st_rdev));
	if (S_ISLNK(st.st_mode)) {
		n = readlink(path, target, sizeof(target) - 1);
		target[n < 0 ? 0 : n] = 0;
		vt_printf(b, " ->%s", target);
	} else {
		list_acl(b, path, "system.posix_acl_access", "acl", flags);
		list_acl(b, path, "system.posix_acl_default", "dacl", flags);
		list_cap(b, path);
		if (!(flags & VT_LIST_NO_USER_XATTR))
			list_user_xattrs(b, path);
	}
	vt_printf(b, "\n");
}

static void walk(struct vt_buf *b, const char *path, const char *rel,
		 unsigned int flags)
{
	struct dirent **ents;
	char cpath[4096], crel[4096];
	struct stat st;
	int i, n;

	list_one(b, path, rel, flags);
	if (lstat(path, &st) || !S_ISDIR(st.st_mode))
		return;
	n = scandir(path, &ents, NULL, alphasort);
	if (n < 0) {
		vt_printf(b, "%s scandir:%s\n", rel, strerrorname_np(errno));
		return;
	}
	for (i = 0; i < n; i++) {
		const char *name = ents[i]->d_name;

		if (strcmp(name, ".") && strcmp(name, "..") &&
		    strcmp(name, "lost+found")) {
			snprintf(cpath, sizeof(cpath), "%s/%s", path, name);
			snprintf(crel, sizeof(crel), "%s/%s", rel, name);
			walk(b, cpath, crel, flags);
		}
		free(ents[i]);
	}
	free(ents);
}

char *vt_list_tree(const char *root, unsigned int flags)
{
	struct vt_buf b = { 0 };

	walk(&b, root, ".", flags);
	return b.s;
}

static void print_diff(const char *a, const char *b)
{
	const char *la = a, *lb = b;
	int shown = 0;

	while (*la || *lb) {
		size_t na = strcspn(la, "\n"), nb = strcspn(lb, "\n");

		if ((na != nb || memcmp(la, lb, na)) && shown++ < 12)
			printf("#   - %.*s\n#   + %.*s\n", (int)na, la, (int)nb,
			       lb);
		la += na + (la[na] == '\n');
		lb += nb + (lb[nb] == '\n');
	}
}

bool vt_same_text(const char *what, const char *a, const char *b)
{
	bool same = a && b && !strcmp(a, b);

	if (!vt_check(same, "%s", what) && a && b)
		print_diff(a, b);
	return same;
}
