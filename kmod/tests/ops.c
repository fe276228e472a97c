// SPDX-License-Identifier: GPL-2.0-only
/*
 * The tree every comparison starts from, and the operations run on it
 * from inside the container, once through shiftfs and once through an
 * idmapped mount.  Each operation logs its result (0 or the errno name)
 * so the two runs can be compared line by line; operations whose
 * outcome is known checks it too.
 */
#define _GNU_SOURCE
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <dirent.h>
#include <unistd.h>

#define CAP_NET_RAW_BIT		(1u << 13)
#define CAP_REVISION_2		0x02000000u
#define CAP_REVISION_3		0x03000000u

/* ---- xattr values ---- */

struct acl_entry {
	uint16_t tag, perm;
	uint32_t id;
};

#define ACL_UOBJ	0x01
#define ACL_U		0x02
#define ACL_GOBJ	0x04
#define ACL_G		0x08
#define ACL_MASK	0x10
#define ACL_OTHER	0x20

static size_t acl_value(unsigned char *out, const struct acl_entry *e, int n)
{
	size_t len = 4;
	uint32_t id;
	int i;

	out[0] = 2;
	out[1] = out[2] = out[3] = 0;
	for (i = 0; i < n; i++, len += 8) {
		out[len] = e[i].tag;
		out[len + 1] = e[i].tag >> 8;
		out[len + 2] = e[i].perm;
		out[len + 3] = 0;
		/* The kernel gives entries without a qualifier id -1. */
		id = e[i].tag == ACL_U || e[i].tag == ACL_G ? e[i].id : ~0u;
		out[len + 4] = id;
		out[len + 5] = id >> 8;
		out[len + 6] = id >> 16;
		out[len + 7] = id >> 24;
	}
	return len;
}

static int set_acl(const char *path, const char *name,
		   const struct acl_entry *e, int n)
{
	unsigned char v[256];

	return lsetxattr(path, name, v, acl_value(v, e, n), 0);
}

static size_t cap_value(unsigned char *v, bool v3, uint32_t rootid)
{
	uint32_t magic = (v3 ? CAP_REVISION_3 : CAP_REVISION_2) | 1;
	uint32_t w[6] = { magic, CAP_NET_RAW_BIT, 0, 0, 0, rootid };

	memcpy(v, w, sizeof(w));
	return v3 ? 24 : 20;
}

static int set_cap(const char *path, bool v3, uint32_t rootid)
{
	unsigned char v[24];

	return lsetxattr(path, "security.capability", v,
			 cap_value(v, v3, rootid), 0);
}

/* ---- the starting tree (made by real root, raw ids) ---- */

static void mk(const char *path, mode_t mode, uid_t uid, gid_t gid,
	       const char *data)
{
	if (S_ISDIR(mode)) {
		if (mkdir(path, 0700) && errno != EEXIST)
			vt_die("mkdir %s", path);
	} else if (S_ISREG(mode)) {
		if (vt_write_file(path, data ? data : "", data ? strlen(data) : 0))
			vt_die("write %s", path);
	} else if (mknod(path, mode, S_ISCHR(mode) ? makedev(0, 0) : 0)) {
		vt_die("mknod %s", path);
	}
	if (lchown(path, uid, gid) || chmod(path, mode & 07777))
		vt_die("chown/chmod %s", path);
}

void ops_populate(const char *root, const char *exe)
{
	static const struct acl_entry facl[] = {
		{ ACL_UOBJ, 6, 0 }, { ACL_U, 4, 1000 }, { ACL_GOBJ, 4, 0 },
		{ ACL_G, 6, 1001 }, { ACL_MASK, 6, 0 }, { ACL_OTHER, 4, 0 },
	};
	static const struct acl_entry uacl[] = {
		{ ACL_UOBJ, 6, 0 }, { ACL_U, 4, 70000 }, { ACL_GOBJ, 4, 0 },
		{ ACL_MASK, 4, 0 }, { ACL_OTHER, 4, 0 },
	};
	static const struct acl_entry dacl[] = {
		{ ACL_UOBJ, 7, 0 }, { ACL_U, 7, 1000 }, { ACL_GOBJ, 5, 0 },
		{ ACL_G, 5, 1001 }, { ACL_MASK, 7, 0 }, { ACL_OTHER, 5, 0 },
	};
	char p[4096], q[4096], *bin;
	size_t len;

#define P(name) (snprintf(p, sizeof(p), "%s/%s", root, name), p)
	mk(root, S_IFDIR | 0755, 0, 0, NULL);
	mk(P("f_root"), S_IFREG | 0644, 0, 0, "root file");
	mk(P("f_user"), S_IFREG | 0640, 1000, 1000, "user file");
	mk(P("f_unmapped"), S_IFREG | 0666, 70000, 70000, "unmapped");
	mk(P("f_suid"), S_IFREG | 04755, 0, 0, "suid");
	mk(P("d_sgid"), S_IFDIR | 02775, 0, 1000, NULL);
	mk(P("d_acl"), S_IFDIR | 0755, 0, 0, NULL);
	mk(P("f_acl"), S_IFREG | 0664, 0, 0, "acl");
	mk(P("f_acl_unmapped"), S_IFREG | 0644, 0, 0, "acl");
	mk(P("f_cap2"), S_IFREG | 0755, 0, 0, "cap");
	mk(P("f_cap3"), S_IFREG | 0755, 0, 0, "cap");
	mk(P("f_cap3u"), S_IFREG | 0755, 0, 0, "cap");
	mk(P("h_link1"), S_IFREG | 0644, 1000, 1000, "linked");
	mk(P("fifo"), S_IFIFO | 0644, 1000, 0, NULL);
	mk(P("c_whiteout"), S_IFCHR | 0, 0, 0, NULL);
	mk(P("x1"), S_IFREG | 0644, 0, 0, "one");
	mk(P("x2"), S_IFREG | 0644, 1000, 1000, "two");
	mk(P("d_rm"), S_IFDIR | 0755, 0, 0, NULL);
	mk(P("bin"), S_IFDIR | 0755, 0, 0, NULL);
	snprintf(q, sizeof(q), "%s/h_link2", root);
	if (link(P("h_link1"), q) || symlink("f_root", P("l_sym")) ||
	    lchown(p, 1000, 1000))
		vt_die("links in %s", root);
	if (set_acl(P("f_acl"), "system.posix_acl_access", facl, 6) ||
	    set_acl(P("f_acl_unmapped"), "system.posix_acl_access", uacl, 5) ||
	    set_acl(P("d_acl"), "system.posix_acl_default", dacl, 6))
		vt_die("ACLs in %s", root);
	if (set_cap(P("f_cap2"), false, 0) || set_cap(P("f_cap3"), true, 1000) ||
	    set_cap(P("f_cap3u"), true, 70000))
		vt_die("capabilities in %s", root);
	/* tmpfs in 6.1 has no user xattrs; the listings then skip them. */
	lsetxattr(P("f_root"), "user.k", "v", 1, 0);

	bin = vt_read_file(exe, &len);
	if (!bin)
		vt_die("reading %s", exe);
	snprintf(p, sizeof(p), "%s/bin/true", root);
	if (vt_write_file(p, bin, len) || chmod(p, 0755))
		vt_die("writing %s", p);
	free(bin);
#undef P
}

/* ---- the operations (in the container, cwd = the tree) ---- */

static int as_user_create_in_sgid(void *arg)
{
	(void)arg;
	if (vt_write_file("d_sgid/by_user", "u", 1) ||
	    mkdir("d_sgid/sub_by_user", 0755))
		return 1;
	return 0;
}

static int as_user_access(void *arg)
{
	struct vt_buf *log = arg;
	int fd, bits = 0;

	/* Each probe is one bit of the exit status: the log is not shared. */
	fd = open("f_root", O_WRONLY);
	bits |= (fd < 0 && errno == EACCES) << 0;
	if (fd >= 0)
		close(fd);
	fd = open("f_acl", O_RDONLY);		/* u:1000:r-- */
	bits |= (fd >= 0) << 1;
	if (fd >= 0)
		close(fd);
	fd = open("f_acl", O_WRONLY);		/* mask/entry: no w for 1000 */
	bits |= (fd < 0 && errno == EACCES) << 2;
	if (fd >= 0)
		close(fd);
	(void)log;
	return bits;
}

static int as_group_1001_write(void *arg)
{
	int fd = open("f_acl", O_WRONLY);	/* g:1001:rw- */

	(void)arg;
	if (fd < 0)
		return 1;
	close(fd);
	return 0;
}

static void op_create(struct vt_buf *log, const char *tgt)
{
	int fd = open("new", O_CREAT | O_EXCL | O_WRONLY, 0640);

	vt_log_rc(log, "create", fd);
	if (fd >= 0) {
		vt_log_rc(log, "write", write(fd, "data", 4) == 4 ? 0 : -1);
		close(fd);
	}
	vt_check(vt_file_is("new", "data"), "%s: create+write+read", tgt);
	vt_log_rc(log, "mkdir", mkdir("newdir", 0750));
	vt_log_rc(log, "mkfifo", mkfifo("newfifo", 0600));
	vt_log_rc(log, "mknod sock", mknod("newsock", S_IFSOCK | 0644, 0));
	vt_log_rc(log, "mknod chr", mknod("newchr", S_IFCHR | 0644,
					   makedev(1, 3)));
	vt_log_rc(log, "symlink", symlink("new", "newlink"));
	vt_check(vt_file_is("newlink", "data"), "%s: symlink followed", tgt);
	vt_log_rc(log, "setgid inheritance as 1000",
		  vt_as_user(1000, 1000, as_user_create_in_sgid, NULL) ? -1 : 0);
}

static void op_links(struct vt_buf *log, const char *tgt)
{
	struct stat a, b;
	int fd;

	vt_log_rc(log, "link", link("new", "newhard"));
	fd = open("newhard", O_RDONLY);
	vt_log_rc(log, "chmod via other name", chmod("new", 0604));
	vt_check(fd >= 0 && !fstat(fd, &a) && !stat("new", &b) &&
		 a.st_ino == b.st_ino && a.st_nlink == 2 &&
		 (a.st_mode & 07777) == 0604,
		 "%s: hard links share one inode", tgt);
	if (fd >= 0)
		close(fd);
	vt_log_rc(log, "unlink", unlink("newhard"));
	vt_check(!stat("new", &b) && b.st_nlink == 1, "%s: nlink after unlink",
		 tgt);
	vt_log_rc(log, "rmdir", rmdir("d_rm"));
	vt_log_rc(log, "rmdir nonempty", rmdir("d_sgid"));
}

static void op_rename(struct vt_buf *log, const char *tgt)
{
	struct stat st;

	vt_log_rc(log, "rename", rename("new", "renamed"));
	vt_log_rc(log, "exchange", renameat2(AT_FDCWD, "x1", AT_FDCWD, "x2",
					     RENAME_EXCHANGE));
	/* nlink too: a plain rename would leave an unlinked inode behind. */
	vt_check(vt_file_is("x1", "two") && vt_file_is("x2", "one") &&
		 !stat("x1", &st) && st.st_nlink == 1 &&
		 !stat("x2", &st) && st.st_nlink == 1,
		 "%s: RENAME_EXCHANGE swaps and keeps both files", tgt);
	vt_log_rc(log, "noreplace", renameat2(AT_FDCWD, "renamed", AT_FDCWD,
					      "f_root", RENAME_NOREPLACE));
	vt_check(vt_file_is("f_root", "root file") &&
		 vt_file_is("renamed", "data"),
		 "%s: RENAME_NOREPLACE leaves both files", tgt);
	vt_log_rc(log, "noreplace new", renameat2(AT_FDCWD, "x2", AT_FDCWD,
						  "x3", RENAME_NOREPLACE));
	/* Allowed in a user namespace since 5.8. */
	vt_log_rc(log, "whiteout", renameat2(AT_FDCWD, "x3", AT_FDCWD, "x4",
					     RENAME_WHITEOUT));
	vt_check(!lstat("x3", &st) && S_ISCHR(st.st_mode) && !st.st_rdev &&
		 vt_file_is("x4", "one"),
		 "%s: RENAME_WHITEOUT moves and leaves a whiteout", tgt);
	vt_log_rc(log, "rename dir", rename("newdir", "newdir2"));
	vt_log_rc(log, "rename over dir", mkdir("d_over", 0755) ? -1 :
		  rename("newdir2", "d_over"));
}

static void op_tmpfile(struct vt_buf *log, const char *tgt)
{
	char proc[64];
	struct stat st;
	int fd;

	fd = open(".", O_TMPFILE | O_RDWR, 0600);
	vt_check(fd >= 0, "%s: O_TMPFILE opens (%s)", tgt,
		 fd < 0 ? strerrorname_np(errno) : "ok");
	vt_log_rc(log, "tmpfile", fd);
	if (fd < 0)
		return;
	vt_log_rc(log, "tmpfile write", write(fd, "tmp", 3) == 3 ? 0 : -1);
	if (!fstat(fd, &st))
		vt_printf(log, "tmpfile owner %u:%u mode %o nlink %lu\n",
			  st.st_uid, st.st_gid, st.st_mode,
			  (unsigned long)st.st_nlink);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	vt_log_rc(log, "tmpfile linkat", linkat(AT_FDCWD, proc, AT_FDCWD,
						"tmplinked",
						AT_SYMLINK_FOLLOW));
	close(fd);
	vt_check(vt_file_is("tmplinked", "tmp"), "%s: O_TMPFILE linked in",
		 tgt);

	fd = open(".", O_TMPFILE | O_EXCL | O_RDWR, 0600);
	vt_log_rc(log, "tmpfile excl", fd);
	if (fd >= 0) {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		vt_log_rc(log, "tmpfile excl linkat",
			  linkat(AT_FDCWD, proc, AT_FDCWD, "tmpexcl",
				 AT_SYMLINK_FOLLOW));
		close(fd);
	}
}

static void op_attrs(struct vt_buf *log)
{
	struct timespec ts[2] = { { 1000000000, 5 }, { 1100000000, 7 } };
	struct stat st;
	int fd;

	vt_log_rc(log, "chown", chown("f_user", 1001, 1002));
	vt_log_rc(log, "chown unmapped", chown("f_user", 70000, 70000));
	vt_log_rc(log, "lchown", lchown("l_sym", 0, 1000));
	vt_log_rc(log, "chown suid", chown("f_suid", 1000, 1000));
	vt_log_rc(log, "chmod", chmod("renamed", 0600));
	vt_log_rc(log, "chmod g+s", chmod("f_root", 02644));
	vt_log_rc(log, "chmod unmapped owner", chmod("f_unmapped", 0600));
	vt_log_rc(log, "truncate", truncate("renamed", 2));
	fd = open("renamed", O_RDWR);
	vt_log_rc(log, "ftruncate", fd < 0 ? -1 : ftruncate(fd, 4000));
	if (fd >= 0)
		close(fd);
	vt_log_rc(log, "utimensat", utimensat(AT_FDCWD, "renamed", ts, 0));
	if (!stat("renamed", &st))
		vt_printf(log, "times %lld.%ld %lld.%ld\n",
			  (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec,
			  (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	vt_log_rc(log, "touch", utimensat(AT_FDCWD, "f_root", NULL, 0));
	vt_log_rc(log, "touch unmapped", utimensat(AT_FDCWD, "f_unmapped",
						   NULL, 0));
	vt_log_rc(log, "open unmapped for write",
		  (fd = open("f_unmapped", O_WRONLY)) < 0 ? -1 : close(fd));
}

static void op_acls(struct vt_buf *log, const char *tgt, unsigned int flags)
{
	static const struct acl_entry acl[] = {
		{ ACL_UOBJ, 6, 0 }, { ACL_U, 4, 1000 }, { ACL_GOBJ, 4, 0 },
		{ ACL_G, 6, 1001 }, { ACL_MASK, 6, 0 }, { ACL_OTHER, 4, 0 },
	};
	unsigned char want[256], got[4096];
	size_t len = acl_value(want, acl, 6);
	ssize_t n;
	int rc, bits;

	rc = set_acl("renamed", "system.posix_acl_access", acl, 6);
	vt_check(!rc, "%s: setfacl with a group entry (%s)", tgt,
		 rc ? strerrorname_np(errno) : "ok");
	vt_log_rc(log, "set acl", rc);
	n = getxattr("renamed", "system.posix_acl_access", got, len);
	vt_check(n == (ssize_t)len && !memcmp(got, want, len),
		 "%s: getxattr with the exact buffer gives the ACL back", tgt);
	n = getxattr("renamed", "system.posix_acl_access", got, sizeof(got));
	if (flags & OPS_REFERENCE)
		/* 6.1 maps ACLs on idmapped mounts by the buffer size. */
		printf("# %s: getxattr with a 4096-byte buffer %s (a 6.1 "
		       "kernel bug on idmapped mounts, not checked)\n", tgt,
		       n == (ssize_t)len && !memcmp(got, want, len) ?
		       "gives the ACL back" : "gives unmapped ids");
	else
		vt_check(n == (ssize_t)len && !memcmp(got, want, len),
			 "%s: getxattr with a 4096-byte buffer gives the ACL "
			 "back", tgt);
	vt_log_rc(log, "default acl inherit",
		  vt_write_file("d_acl/inherits", "i", 1));
	vt_log_rc(log, "mkdir inherits", mkdir("d_acl/subdir", 0777));
	vt_log_rc(log, "remove acl", removexattr("f_acl_unmapped",
						 "system.posix_acl_access"));
	vt_log_rc(log, "set acl unmapped id",
		  set_acl("x1", "system.posix_acl_access",
			  (const struct acl_entry[]){ { ACL_UOBJ, 6, 0 },
			  { ACL_U, 4, 70000 }, { ACL_GOBJ, 4, 0 },
			  { ACL_MASK, 4, 0 }, { ACL_OTHER, 4, 0 } }, 5));

	bits = vt_as_user(1000, 1000, as_user_access, log);
	vt_check(bits == 7, "%s: permission as uid 1000 (mode, ACL user, "
		 "mask) bits %d", tgt, bits);
	vt_check(!vt_as_user(1002, 1001, as_group_1001_write, NULL),
		 "%s: ACL group entry grants write", tgt);
}

static void op_caps(struct vt_buf *log, const char *tgt)
{
	unsigned char v[64];
	ssize_t n;

	vt_log_rc(log, "set cap v2", set_cap("renamed", false, 0));
	vt_log_rc(log, "set cap v3 root 1000", set_cap("x1", true, 1000));
	vt_log_rc(log, "set cap v3 root unmapped", set_cap("x4", true, 70000));
	n = getxattr("f_cap3u", "security.capability", v, sizeof(v));
	vt_log_rc(log, "get cap with unmapped root", n < 0 ? -1 : 0);
	vt_log_rc(log, "remove cap", removexattr("f_cap2",
						 "security.capability"));
	/* Other namespaces: the kernel's answers, the same on both mounts. */
	vt_log_rc(log, "set trusted", setxattr("x1", "trusted.t", "v", 1, 0));
	vt_log_rc(log, "get trusted", getxattr("x1", "trusted.t", v, sizeof(v)));
	vt_log_rc(log, "set security.other",
		  setxattr("x1", "security.other", "v", 1, 0));
	vt_log_rc(log, "get security.other",
		  getxattr("x1", "security.other", v, sizeof(v)));
	(void)tgt;
}

static void op_ext4_only(struct vt_buf *log, const char *tgt)
{
	char names[1024], val[16];
	unsigned int fl = 0;
	ssize_t n;
	int fd;

	vt_log_rc(log, "user xattr set", setxattr("renamed", "user.t", "abc", 3,
						  0));
	n = getxattr("renamed", "user.t", val, sizeof(val));
	vt_check(n == 3 && !memcmp(val, "abc", 3), "%s: user xattr read", tgt);
	n = listxattr("renamed", names, sizeof(names));
	vt_log_rc(log, "listxattr", n < 0 ? -1 : 0);
	vt_log_rc(log, "user xattr remove", removexattr("f_root", "user.k"));
	vt_log_rc(log, "user xattr replace missing",
		  setxattr("renamed", "user.nope", "x", 1, XATTR_REPLACE));

	fd = open("renamed", O_RDONLY);
	vt_log_rc(log, "getflags", fd < 0 ? -1 : ioctl(fd, FS_IOC_GETFLAGS, &fl));
	fl |= FS_NODUMP_FL;
	vt_log_rc(log, "setflags nodump", ioctl(fd, FS_IOC_SETFLAGS, &fl));
	fl = 0;
	ioctl(fd, FS_IOC_GETFLAGS, &fl);
	vt_printf(log, "flags %#x\n", fl & (FS_NODUMP_FL | FS_IMMUTABLE_FL));
	fl |= FS_IMMUTABLE_FL;
	vt_log_rc(log, "setflags immutable", ioctl(fd, FS_IOC_SETFLAGS, &fl));
	if (fd >= 0)
		close(fd);
	fd = open("f_unmapped", O_RDONLY);
	vt_log_rc(log, "getflags unmapped", ioctl(fd, FS_IOC_GETFLAGS, &fl));
	fl |= FS_NODUMP_FL;
	vt_log_rc(log, "setflags unmapped", ioctl(fd, FS_IOC_SETFLAGS, &fl));
	if (fd >= 0)
		close(fd);
}

#define IO_SIZE (128 * 1024)

static void op_io(struct vt_buf *log, const char *tgt)
{
	static char buf[IO_SIZE], back[IO_SIZE];
	int fd, fd2, pfd[2];
	char *map;
	size_t i;
	loff_t off;
	ssize_t n;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 7 + i / 4096);
	fd = open("io", O_CREAT | O_RDWR, 0644);
	if (fd < 0) {
		vt_check(false, "%s: open io", tgt);
		return;
	}
	vt_check(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) &&
		 pread(fd, back, sizeof(back), 0) == sizeof(back) &&
		 !memcmp(buf, back, sizeof(buf)), "%s: pwrite/pread", tgt);
	vt_check(lseek(fd, 0, SEEK_END) == IO_SIZE &&
		 lseek(fd, 100, SEEK_SET) == 100 &&
		 read(fd, back, 10) == 10 && !memcmp(back, buf + 100, 10) &&
		 lseek(fd, 0, SEEK_CUR) == 110, "%s: llseek + read", tgt);
	vt_check(lseek(fd, 0, SEEK_DATA) == 0, "%s: SEEK_DATA", tgt);

	map = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	vt_check(map != MAP_FAILED, "%s: mmap shared", tgt);
	if (map != MAP_FAILED) {
		memcpy(map + 10, "MAPPED", 6);
		msync(map, 8192, MS_SYNC);
		munmap(map, 8192);
		vt_check(pread(fd, back, 6, 10) == 6 &&
			 !memcmp(back, "MAPPED", 6),
			 "%s: shared mapping writes the file", tgt);
	}
	map = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	vt_check(map != MAP_FAILED, "%s: mmap private", tgt);
	if (map != MAP_FAILED) {
		vt_check(!memcmp(map + 10, "MAPPED", 6),
			 "%s: private mapping reads the file", tgt);
		memcpy(map + 20, "PRIVATE", 7);
		munmap(map, 8192);
		vt_check(pread(fd, back, 7, 20) == 7 &&
			 memcmp(back, "PRIVATE", 7),
			 "%s: private mapping leaves the file", tgt);
	}
	vt_log_rc(log, "fsync", fsync(fd));
	vt_log_rc(log, "fdatasync", fdatasync(fd));
	vt_log_rc(log, "fallocate", fallocate(fd, 0, 0, 1 << 20));
	vt_log_rc(log, "punch hole", fallocate(fd, FALLOC_FL_PUNCH_HOLE |
					       FALLOC_FL_KEEP_SIZE, 0, 4096));
	vt_check(pread(fd, back, 16, 0) == 16 && !memcmp(back, "\0\0\0\0", 4),
		 "%s: punched hole reads zeros", tgt);
	vt_check(lseek(fd, 0, SEEK_END) == 1 << 20, "%s: size after fallocate",
		 tgt);

	if (pipe(pfd) == 0) {
		off = 8192;
		n = write(pfd[1], "SPLICED", 7);
		vt_check(n == 7 && splice(pfd[0], NULL, fd, &off, 7, 0) == 7 &&
			 pread(fd, back, 7, 8192) == 7 &&
			 !memcmp(back, "SPLICED", 7), "%s: splice into", tgt);
		off = 8192;
		vt_check(splice(fd, &off, pfd[1], NULL, 7, 0) == 7 &&
			 read(pfd[0], back, 7) == 7 &&
			 !memcmp(back, "SPLICED", 7), "%s: splice out of", tgt);
		close(pfd[0]);
		close(pfd[1]);
	}
	fd2 = open("io_copy", O_CREAT | O_RDWR | O_TRUNC, 0644);
	off = 8192;
	vt_check(fd2 >= 0 && copy_file_range(fd, &off, fd2, NULL, 4096, 0) ==
		 4096 && pread(fd2, back, 7, 0) == 7 &&
		 !memcmp(back, "SPLICED", 7), "%s: copy_file_range", tgt);
	off = 8192;
	vt_check(fd2 >= 0 && sendfile(fd2, fd, &off, 100) == 100,
		 "%s: sendfile", tgt);
	if (fd2 >= 0)
		close(fd2);
	close(fd);
}

static int count_dir(DIR *d)
{
	int n = 0;

	while (readdir(d))
		n++;
	return n;
}

static void op_dir(struct vt_buf *log, const char *tgt)
{
	struct statfs sfs;
	DIR *d = opendir(".");
	long pos;
	int a, b, c;

	if (!d) {
		vt_check(false, "%s: opendir", tgt);
		return;
	}
	a = count_dir(d);
	rewinddir(d);
	b = count_dir(d);
	rewinddir(d);
	readdir(d);
	readdir(d);
	pos = telldir(d);
	c = count_dir(d);
	seekdir(d, pos);
	vt_check(a == b && a > 10 && count_dir(d) == c && c == a - 2,
		 "%s: readdir, rewinddir, seekdir (%d %d %d)", tgt, a, b, c);
	vt_printf(log, "entries %d\n", a);
	closedir(d);
	vt_check(!statfs(".", &sfs) && sfs.f_blocks > 0 && sfs.f_bsize > 0,
		 "%s: statfs", tgt);
}

static int run_exec(void *arg)
{
	char *argv[] = { "true", NULL };

	(void)arg;
	execv("bin/true", argv);
	return 99;
}

void ops_run(struct vt_buf *log, struct vt_buf *log_ext4, const char *tgt,
	     unsigned int flags)
{
	op_create(log, tgt);
	op_links(log, tgt);
	op_rename(log, tgt);
	op_tmpfile(log, tgt);
	op_attrs(log);
	op_acls(log, tgt, flags);
	op_caps(log, tgt);
	if (flags & OPS_EXT4)
		op_ext4_only(log_ext4, tgt);
	op_io(log, tgt);
	op_dir(log, tgt);
	vt_check(vt_as_user(0, 0, run_exec, NULL) == 0,
		 "%s: exec from the container's tree", tgt);
}
