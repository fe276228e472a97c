// SPDX-License-Identifier: GPL-2.0-only
/*
 * The in-VM test suite for shiftfs.ko, run as real root by the VM's init.
 *
 *   shiftfs-test setup		mounts the lowers, builds the trees, marks
 *   shiftfs-test security	mark rules (who may mount what, noexec)
 *   shiftfs-test ext4		shiftfs vs an idmapped mount, same userns
 *   shiftfs-test tmpfs		shiftfs on tmpfs vs the ext4 idmapped run
 *   shiftfs-test whiteout	RENAME_WHITEOUT through a mount by real root
 *   shiftfs-test behind		the lower changed behind shiftfs' back
 *   shiftfs-test overlay	shiftfs as an overlayfs lower layer
 *   shiftfs-test pair DEV DEV	an image through shiftfs vs shifted copy
 *   shiftfs-test stress SECS	random operations, then unmount, rmmod
 *   shiftfs-test populate DIR EXE	builds the starting tree (host side)
 *
 * Each prints "ok - ..." / "not ok - ..." lines and exits non-zero when
 * something failed.
 */
#define _GNU_SOURCE
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define RESULTS "/results"

static void mkdirs(const char *path, mode_t mode)
{
	char tmp[4096], *p;

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		mkdir(tmp, 0755);
		*p = '/';
	}
	if (mkdir(tmp, mode) && errno != EEXIST)
		vt_die("mkdir %s", path);
	chmod(tmp, mode);
}

static void save(const char *name, const char *text)
{
	char path[256];

	snprintf(path, sizeof(path), RESULTS "/%s", name);
	if (vt_write_file(path, text ? text : "", text ? strlen(text) : 0))
		vt_die("writing %s", path);
}

static char *load(const char *name)
{
	char path[256];
	char *s;

	snprintf(path, sizeof(path), RESULTS "/%s", name);
	s = vt_read_file(path, NULL);
	if (!s)
		vt_die("reading %s", path);
	return s;
}

static int do_setup(void)
{
	mkdirs("/lower/ext4", 0755);
	mkdirs("/lower/tmpfs", 0755);
	mkdirs("/mark/ext4", 0755);
	mkdirs("/mark/tmpfs", 0755);
	mkdirs("/s", 0755);
	mkdirs("/i", 0755);
	mkdirs("/w", 0755);
	mkdirs("/ov", 0755);
	mkdirs(RESULTS, 01777);
	if (mount("/dev/vda", "/lower/ext4", "ext4", 0, NULL))
		vt_die("mounting /dev/vda");
	if (mount("lowertmp", "/lower/tmpfs", "tmpfs", 0, "mode=0755"))
		vt_die("mounting tmpfs");
	ops_populate("/lower/ext4/tree", "/bin/busybox");
	ops_populate("/lower/ext4/tree/a", "/bin/busybox");
	ops_populate("/lower/ext4/tree/b", "/bin/busybox");
	ops_populate("/lower/tmpfs/tree", "/bin/busybox");
	ops_populate("/lower/tmpfs/tree/a", "/bin/busybox");
	vt_check(!mount("/lower/ext4/tree", "/mark/ext4", "shiftfs", 0, "mark"),
		 "mark ext4 lower");
	vt_check(!mount("/lower/tmpfs/tree", "/mark/tmpfs", "shiftfs", 0,
			"mark"), "mark tmpfs lower");
	return vt_failures != 0;
}

/* ---- security model ---- */

static int exec_errno(const char *path)
{
	char *argv[] = { "true", NULL };
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (!pid) {
		execv(path, argv);
		_exit(errno);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int security_in_userns(void *arg)
{
	int rc;

	(void)arg;
	rc = mount("/lower/ext4/tree/a", "/s", "shiftfs", 0, NULL);
	vt_check(rc && errno == EPERM,
		 "userns: a path that is no mark is refused with EPERM (%s)",
		 rc ? strerrorname_np(errno) : "mounted");
	rc = mount("/lower/ext4/tree/a", "/s", "shiftfs", 0, "mark");
	vt_check(rc && errno == EPERM, "userns: -o mark is refused (%s)",
		 rc ? strerrorname_np(errno) : "mounted");
	rc = mount("/mark/ext4/a", "/s", "shiftfs", 0, NULL);
	vt_check(!rc, "userns: a mark can be mounted (%s)",
		 rc ? strerrorname_np(errno) : "ok");
	vt_check(exec_errno("/s/bin/true") == 0,
		 "userns: the shifted mount allows exec");
	rc = mount("/s", "/w", "shiftfs", 0, NULL);
	vt_check(rc && errno == EPERM,
		 "userns: a shifted mount is no mark (%s)",
		 rc ? strerrorname_np(errno) : "mounted");
	if (!rc)
		umount("/w");
	umount("/s");
	rc = mount("/mark/ext4/a", "/s", "shiftfs", 0, "bogus");
	vt_check(rc && errno == EINVAL, "unknown option is refused (%s)",
		 rc ? strerrorname_np(errno) : "mounted");
	return vt_failures != 0;
}

static int mount_in_foreign_mntns(void *arg)
{
	int rc = mount("/mark/ext4/a", "/s", "shiftfs", 0, NULL);

	(void)arg;
	vt_check(rc && errno == EPERM, "userns: refused in a mount namespace "
		 "the user namespace does not own (%s)",
		 rc ? strerrorname_np(errno) : "mounted");
	if (!rc)
		umount("/s");
	return vt_failures != 0;
}

static int do_security(void)
{
	struct stat st;
	int rc;

	vt_check(exec_errno("/mark/ext4/a/bin/true") == EACCES,
		 "the mark mount refuses exec");
	vt_check(!stat("/mark/ext4/a/f_user", &st) && st.st_uid == 1000,
		 "the mark shows ids unshifted");
	rc = vt_in_userns(security_in_userns, NULL, NULL, NULL);
	vt_check(rc == 0, "security checks in a user namespace");
	rc = vt_in_userns_flags(VT_KEEP_MNTNS, mount_in_foreign_mntns, NULL,
				NULL, NULL);
	vt_check(rc == 0, "security checks in the initial mount namespace");
	return vt_failures != 0;
}

/* ---- shiftfs vs idmapped mount ---- */

struct run {
	const char *kind;	/* "ext4", "tmpfs" */
	const char *mark;	/* the tree to mount through shiftfs */
	const char *idmapped;	/* the tree an idmapped mount shows, or NULL */
	unsigned int flags;
};

static int idmap_mount(int userns_fd, void *arg)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_IDMAP,
		.userns_fd = userns_fd,
	};
	struct run *r = arg;
	int fd;

	if (!r->idmapped)
		return 0;
	fd = open_tree(AT_FDCWD, r->idmapped, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0 || mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) ||
	    move_mount(fd, "", AT_FDCWD, "/i", MOVE_MOUNT_F_EMPTY_PATH)) {
		vt_check(false, "idmapped mount of %s (%s)", r->idmapped,
			 strerrorname_np(errno));
		return 1;
	}
	close(fd);
	return 0;
}

/* Lists, runs the operations, lists again; saves all of it. */
static void run_one(const struct run *r, const char *dir, const char *tag)
{
	struct vt_buf log = { 0 }, log_ext4 = { 0 };
	char name[128], what[128];
	char *list;

	if (chdir(dir))
		vt_die("chdir %s", dir);
#define SAVE(suffix, text) (snprintf(name, sizeof(name), "%s-%s-%s", \
				     r->kind, tag, suffix), save(name, text))
	list = vt_list_tree(".", 0);
	SAVE("before", list);
	free(list);
	list = vt_list_tree(".", VT_LIST_NO_USER_XATTR);
	SAVE("before-nouser", list);
	free(list);

	snprintf(what, sizeof(what), "%s/%s", r->kind, tag);
	vt_printf(&log, "%s", "");
	vt_printf(&log_ext4, "%s", "");
	ops_run(&log, &log_ext4, what,
		r->flags | (strcmp(tag, "shiftfs") ? OPS_REFERENCE : 0));
	SAVE("ops", log.s);
	SAVE("ops-ext4", log_ext4.s);
	vt_buf_free(&log);
	vt_buf_free(&log_ext4);

	list = vt_list_tree(".", 0);
	SAVE("after", list);
	free(list);
	list = vt_list_tree(".", VT_LIST_NO_USER_XATTR);
	SAVE("after-nouser", list);
	free(list);
	if (!strcmp(tag, "shiftfs")) {
		list = vt_list_tree(".", VT_LIST_BIGBUF);
		vt_check(list && !strstr(list, "bigbuf-mismatch"),
			 "%s: every ACL reads the same with a 4096-byte buffer",
			 what);
		free(list);
	}
	if (chdir("/"))
		vt_die("chdir /");
#undef SAVE
}

static void same_files(const char *what, const char *a, const char *b)
{
	char *ta = load(a), *tb = load(b);

	vt_same_text(what, ta, tb);
	free(ta);
	free(tb);
}

static int compare_in_userns(void *arg)
{
	struct run *r = arg;
	int rc;

	rc = mount(r->mark, "/s", "shiftfs", 0, NULL);
	if (!vt_check(!rc, "%s: mount shiftfs from a user namespace (%s)",
		      r->kind, rc ? strerrorname_np(errno) : "ok"))
		return 1;
	run_one(r, "/s", "shiftfs");
	if (r->idmapped)
		run_one(r, "/i", "idmapped");
	umount("/s");
	return vt_failures != 0;
}

static int do_compare(struct run *r)
{
	char a[128], b[128], what[128];
	static const char *const parts[] = { "before", "ops", "ops-ext4",
					     "after" };
	size_t i;
	int rc;

	rc = vt_in_userns(compare_in_userns, r, idmap_mount, r);
	if (r->idmapped)
		umount2("/i", MNT_DETACH);
	vt_check(rc == 0, "%s: operations ran in the container", r->kind);

	/* Same views from inside: ext4 against the idmapped mount ... */
	for (i = 0; r->idmapped && i < sizeof(parts) / sizeof(*parts); i++) {
		snprintf(a, sizeof(a), "%s-shiftfs-%s", r->kind, parts[i]);
		snprintf(b, sizeof(b), "%s-idmapped-%s", r->kind, parts[i]);
		snprintf(what, sizeof(what), "%s: %s same via shiftfs and "
			 "idmapped mount", r->kind, parts[i]);
		same_files(what, a, b);
	}
	/* ... tmpfs against what the ext4 idmapped mount gave. */
	for (i = 0; !r->idmapped && i < sizeof(parts) / sizeof(*parts); i++) {
		if (!strcmp(parts[i], "ops-ext4"))
			continue;
		snprintf(a, sizeof(a), "%s-shiftfs-%s%s", r->kind, parts[i],
			 strcmp(parts[i], "ops") ? "-nouser" : "");
		snprintf(b, sizeof(b), "ext4-idmapped-%s%s", parts[i],
			 strcmp(parts[i], "ops") ? "-nouser" : "");
		snprintf(what, sizeof(what), "%s: %s via shiftfs as expected "
			 "(ext4 idmapped run)", r->kind, parts[i]);
		same_files(what, a, b);
	}
	return vt_failures != 0;
}

/* Same owners on disk, seen by real root. */
static void same_raw(const char *what, const char *a, const char *b,
		     unsigned int flags)
{
	char *ta = vt_list_tree(a, flags), *tb = vt_list_tree(b, flags);

	vt_same_text(what, ta, tb);
	free(ta);
	free(tb);
}

/* What the container did, as stored: the inverse map, spelled out. */
static void stored_as(const char *lower)
{
	char p[256];
	struct stat st;

#define AT(name) (snprintf(p, sizeof(p), "%s/%s", lower, name), p)
	vt_check(!lstat(AT("renamed"), &st) && st.st_uid == 0 &&
		 st.st_gid == 0, "%s: container root's file stored as 0:0",
		 lower);
	vt_check(!lstat(AT("f_user"), &st) && st.st_uid == 1001 &&
		 st.st_gid == 1002, "%s: chown 1001:1002 stored as such",
		 lower);
	vt_check(!lstat(AT("d_sgid/sub_by_user"), &st) && st.st_uid == 1000 &&
		 st.st_gid == 1000 && (st.st_mode & S_ISGID),
		 "%s: setgid directory inherited as stored", lower);
	vt_check(!lstat(AT("tmplinked"), &st) && st.st_uid == 0,
		 "%s: O_TMPFILE owner stored as 0", lower);
#undef AT
}

static int do_ext4(void)
{
	struct run r = { "ext4", "/mark/ext4/a", "/lower/ext4/tree/b",
			 OPS_EXT4 };

	do_compare(&r);
	stored_as("/lower/ext4/tree/a");
	same_raw("ext4: same ids on disk via shiftfs and idmapped mount",
		 "/lower/ext4/tree/a", "/lower/ext4/tree/b", 0);
	return vt_failures != 0;
}

static int do_tmpfs(void)
{
	struct run r = { "tmpfs", "/mark/tmpfs/a", NULL, 0 };

	do_compare(&r);
	stored_as("/lower/tmpfs/tree/a");
	same_raw("tmpfs: ids on disk as the ext4 idmapped run stored them",
		 "/lower/tmpfs/tree/a", "/lower/ext4/tree/b",
		 VT_LIST_NO_USER_XATTR);
	return vt_failures != 0;
}

/* ---- RENAME_WHITEOUT through a mount made by real root (no shift) ---- */

static void whiteout_on(const char *mark, const char *lower)
{
	char p[256];
	struct stat st;
	int rc;

	if (mount(mark, "/w", "shiftfs", 0, NULL))
		vt_die("mounting %s as real root", mark);
	rc = vt_write_file("/w/wsrc", "one", 3) ||
	     renameat2(AT_FDCWD, "/w/wsrc", AT_FDCWD, "/w/xw", RENAME_WHITEOUT);
	snprintf(p, sizeof(p), "%s/wsrc", lower);
	vt_check(!rc && !lstat(p, &st) && S_ISCHR(st.st_mode) &&
		 st.st_rdev == 0 && vt_file_is("/w/xw", "one"),
		 "%s: RENAME_WHITEOUT leaves a whiteout (%s)", mark,
		 rc ? strerrorname_np(errno) : "ok");
	umount("/w");
}

static int do_whiteout(void)
{
	whiteout_on("/mark/ext4/a", "/lower/ext4/tree/a");
	whiteout_on("/mark/tmpfs/a", "/lower/tmpfs/tree/a");
	return vt_failures != 0;
}

/* ---- the lower changes behind shiftfs: cached names must follow ---- */

static void behind_on(const char *mark, const char *lower)
{
	char a[256], b[256], c[256];
	struct stat st;

	if (mount(mark, "/w", "shiftfs", 0, NULL))
		vt_die("mounting %s as real root", mark);
	vt_write_file("/w/bh1", "first", 5);
	vt_write_file("/w/bh2", "second", 6);
	vt_check(vt_file_is("/w/bh1", "first") && vt_file_is("/w/bh2", "second"),
		 "%s: names cached", mark);
	snprintf(a, sizeof(a), "%s/bh1", lower);
	snprintf(b, sizeof(b), "%s/bh2", lower);
	snprintf(c, sizeof(c), "%s/bh3", lower);
	if (rename(a, b) || vt_write_file(c, "third", 5))
		vt_die("changing %s", lower);
	vt_check(stat("/w/bh1", &st) && errno == ENOENT,
		 "%s: a rename below: old name gone", mark);
	vt_check(vt_file_is("/w/bh2", "first") && !stat("/w/bh2", &st) &&
		 st.st_nlink == 1, "%s: a rename below: new name, new file",
		 mark);
	vt_check(vt_file_is("/w/bh3", "third"),
		 "%s: a create below shows through", mark);
	if (unlink(b))
		vt_die("unlinking %s", b);
	vt_check(stat("/w/bh2", &st) && errno == ENOENT,
		 "%s: an unlink below shows through", mark);
	umount("/w");
}

static int do_behind(void)
{
	behind_on("/mark/ext4/a", "/lower/ext4/tree/a");
	behind_on("/mark/tmpfs/a", "/lower/tmpfs/tree/a");
	return vt_failures != 0;
}

/* ---- overlayfs on top ---- */

static int overlay_in_userns(void *arg)
{
	struct stat st, sst;
	char *a, *b;
	int fd;

	(void)arg;
	if (mount("/mark/ext4", "/s", "shiftfs", 0, NULL) ||
	    mount("ovt", "/ov", "tmpfs", 0, NULL) ||
	    mkdir("/ov/upper", 0755) || mkdir("/ov/work", 0755) ||
	    mkdir("/ov/merged", 0755)) {
		vt_check(false, "overlay: setup (%s)", strerrorname_np(errno));
		return 1;
	}
	if (!vt_check(!mount("overlay", "/ov/merged", "overlay", 0,
			     "lowerdir=/s,upperdir=/ov/upper,workdir=/ov/work,"
			     "userxattr"),
		      "overlay: shiftfs as the lower layer (%s)",
		      strerrorname_np(errno)))
		return 1;
	vt_check(!stat("/ov/merged/f_user", &st) && st.st_uid == 1000 &&
		 st.st_gid == 1000 && !stat("/ov/merged/f_root", &sst) &&
		 sst.st_uid == 0, "overlay: owners as shiftfs shows them");
	vt_check(vt_file_is("/ov/merged/f_root", "root file"),
		 "overlay: reads through shiftfs");
	a = vt_list_tree("/s/d_acl", 0);
	b = vt_list_tree("/ov/merged/d_acl", 0);
	vt_same_text("overlay: ACLs and xattrs as shiftfs shows them", a, b);
	free(a);
	free(b);
	fd = open("/ov/merged/f_user", O_WRONLY | O_APPEND);
	vt_check(fd >= 0 && write(fd, "+", 1) == 1, "overlay: copy-up write");
	if (fd >= 0)
		close(fd);
	vt_check(!stat("/ov/upper/f_user", &st) && st.st_uid == 1000 &&
		 vt_file_is("/ov/merged/f_user", "user file+") &&
		 vt_file_is("/s/f_user", "user file"),
		 "overlay: copy-up keeps the owner, lower unchanged");
	vt_check(!unlink("/ov/merged/x1") && stat("/ov/merged/x1", &st) &&
		 !stat("/s/x1", &st), "overlay: unlink of a lower file");
	vt_check(!mkdir("/ov/merged/newdir", 0755) &&
		 !stat("/ov/upper/newdir", &st) && st.st_uid == 0,
		 "overlay: new directory owned by container root");
	umount("/ov/merged");
	umount("/ov");
	umount("/s");
	return vt_failures != 0;
}

static int do_overlay(void)
{
	int rc = vt_in_userns(overlay_in_userns, NULL, NULL, NULL);

	vt_check(rc == 0, "overlay checks in a user namespace");
	return vt_failures != 0;
}

/* ---- pairing with the userland tool ---- */

static int count_lines(const char *s)
{
	int n = 0;

	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

static int pair_in_userns(void *arg)
{
	char *a, *b;

	(void)arg;
	if (!vt_check(!mount("/mark/pair", "/s", "shiftfs", 0, NULL),
		      "pair: mount the original through shiftfs"))
		return 1;
	a = vt_list_tree("/s", 0);
	b = vt_list_tree("/lower/pair-shifted", 0);
	vt_same_text("pair: original via shiftfs == shiftimg copy mounted "
		     "plainly (owners, ACLs, capabilities)", a, b);
	printf("# pair: %d objects compared\n", count_lines(a));
	free(a);
	free(b);
	umount("/s");
	return vt_failures != 0;
}

static int do_pair(const char *orig, const char *shifted)
{
	mkdirs("/lower/pair-orig", 0755);
	mkdirs("/lower/pair-shifted", 0755);
	mkdirs("/mark/pair", 0755);
	if (mount(orig, "/lower/pair-orig", "ext4", MS_RDONLY, NULL) ||
	    mount(shifted, "/lower/pair-shifted", "ext4", MS_RDONLY, NULL) ||
	    mount("/lower/pair-orig", "/mark/pair", "shiftfs", 0, "mark"))
		vt_die("pair: mounting the images");
	vt_check(vt_in_userns(pair_in_userns, NULL, NULL, NULL) == 0,
		 "pair: listings compared in a user namespace");
	umount("/mark/pair");
	umount("/lower/pair-orig");
	umount("/lower/pair-shifted");
	return vt_failures != 0;
}

/* ---- stress ---- */

#define STRESS_NAMES	12

static void stress_name(char *out, size_t len, const char *dir, unsigned r)
{
	static const char *const sub[] = { "", "d0/", "d1/", "d2/" };

	snprintf(out, len, "%s/%sn%u", dir, sub[r % 4], (r / 4) % STRESS_NAMES);
}

/* Opens never block: the names may be FIFOs. */
static void stress_one(const char *dir, unsigned int r)
{
	static const unsigned char acl[] = {
		2, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 2, 0, 4, 0, 0xe8, 3, 0, 0,
		4, 0, 4, 0, 0, 0, 0, 0, 8, 0, 6, 0, 0xe9, 3, 0, 0,
		0x10, 0, 6, 0, 0, 0, 0, 0, 0x20, 0, 4, 0, 0, 0, 0, 0,
	};
	char a[256], b[256], buf[8192];
	struct stat st;
	char *map;
	int fd;

	stress_name(a, sizeof(a), dir, r >> 5);
	stress_name(b, sizeof(b), dir, r >> 13);
	switch (r % 24) {
	case 0: fd = open(a, O_CREAT | O_RDWR | O_NONBLOCK, 0644);
		if (fd >= 0) {
			pwrite(fd, buf, (r >> 7) % sizeof(buf), (r >> 3) % 65536);
			close(fd);
		}
		break;
	case 1: fd = open(a, O_RDONLY | O_NONBLOCK);
		if (fd >= 0) {
			pread(fd, buf, sizeof(buf), 0);
			close(fd);
		}
		break;
	case 2: unlink(a); break;
	case 3: rename(a, b); break;
	case 4: renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE); break;
	case 5: renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_NOREPLACE); break;
	case 6: link(a, b); break;
	case 7: mkdir(a, 0755); break;
	case 8: rmdir(a); break;
	case 9: chmod(a, r & 07777); break;
	case 10: lchown(a, r % 3 * 1000, r % 5 * 1000); break;
	case 11: truncate(a, r % 100000); break;
	case 12: lsetxattr(a, "system.posix_acl_access", acl, sizeof(acl), 0);
		break;
	case 13: lgetxattr(a, "system.posix_acl_access", buf, sizeof(buf));
		llistxattr(a, buf, sizeof(buf));
		break;
	case 14: lstat(a, &st); break;
	case 15: fd = open(dir, O_RDONLY | O_DIRECTORY);
		if (fd >= 0) {
			syscall(SYS_getdents64, fd, buf, sizeof(buf));
			close(fd);
		}
		break;
	case 16: fd = open(a, O_RDWR | O_NONBLOCK);
		if (fd >= 0 && !ftruncate(fd, 8192)) {
			map = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
				   MAP_SHARED, fd, 0);
			if (map != MAP_FAILED) {
				memset(map, r, 100);
				munmap(map, 8192);
			}
		}
		if (fd >= 0)
			close(fd);
		break;
	case 17: fd = open(dir, O_TMPFILE | O_RDWR, 0600);
		if (fd >= 0) {
			snprintf(buf, sizeof(buf), "/proc/self/fd/%d", fd);
			if (r & 1)
				linkat(AT_FDCWD, buf, AT_FDCWD, a,
				       AT_SYMLINK_FOLLOW);
			close(fd);
		}
		break;
	case 18: symlink("n1", a); readlink(a, buf, sizeof(buf)); break;
	case 19: fd = open(a, O_WRONLY | O_NONBLOCK);
		if (fd >= 0) {
			fallocate(fd, r & 1 ? FALLOC_FL_PUNCH_HOLE |
				  FALLOC_FL_KEEP_SIZE : 0, 0, 65536);
			fsync(fd);
			close(fd);
		}
		break;
	case 20: {
		int in = open(a, O_RDONLY | O_NONBLOCK);
		int out = open(b, O_WRONLY | O_NONBLOCK);

		if (in >= 0 && out >= 0)
			copy_file_range(in, NULL, out, NULL, 65536, 0);
		if (in >= 0)
			close(in);
		if (out >= 0)
			close(out);
		break;
	}
	case 21: {
		unsigned char cap[20] = { 1, 0, 0, 2, 0, 0x20 };

		lsetxattr(a, "security.capability", cap, sizeof(cap), 0);
		break;
	}
	case 22: mknod(a, S_IFIFO | 0644, 0); break;
	default: utimensat(AT_FDCWD, a, NULL, AT_SYMLINK_NOFOLLOW); break;
	}
}

static void stress_loop(const char *dir, int secs, unsigned int seed)
{
	time_t end = time(NULL) + secs;
	unsigned long n = 0;

	while (time(NULL) < end) {
		seed = seed * 1103515245u + 12345u;
		stress_one(dir, seed ^ (seed >> 16));
		n++;
	}
	printf("# stress worker %u: %lu operations\n", seed & 0xff, n);
}

static int stress_in_userns(void *arg)
{
	int secs = *(int *)arg, i, status, bad = 0;
	pid_t pids[4];

	if (mount("/mark/ext4/a", "/s", "shiftfs", 0, NULL))
		return 1;
	mkdir("/s/stress", 0777);
	mkdir("/s/stress/d0", 0777);
	mkdir("/s/stress/d1", 0777);
	mkdir("/s/stress/d2", 0777);
	fflush(stdout);
	for (i = 0; i < 4; i++) {
		pids[i] = fork();
		if (!pids[i]) {
			stress_loop("/s/stress", secs, 1234u + i);
			_exit(0);
		}
	}
	for (i = 0; i < 4; i++) {
		waitpid(pids[i], &status, 0);
		bad += !WIFEXITED(status) || WEXITSTATUS(status);
	}
	vt_check(!bad, "stress: container workers finished normally");
	vt_check(!umount("/s"), "stress: unmount after the run");
	return bad || vt_failures;
}

static int do_stress(int secs)
{
	pid_t host;
	int rc, status;

	/* Real root changes the same lower tree behind shiftfs' back. */
	mkdirs("/lower/ext4/tree/a/stress", 0777);
	fflush(stdout);
	host = fork();
	if (!host) {
		stress_loop("/lower/ext4/tree/a/stress", secs, 99u);
		_exit(0);
	}
	rc = vt_in_userns(stress_in_userns, &secs, NULL, NULL);
	waitpid(host, &status, 0);
	vt_check(rc == 0 && WIFEXITED(status),
		 "stress: %d s of random operations from 5 processes", secs);

	vt_check(!umount("/mark/ext4") && !umount("/mark/tmpfs"),
		 "unmount the marks");
	rc = syscall(SYS_delete_module, "shiftfs", O_NONBLOCK);
	vt_check(!rc, "rmmod shiftfs (%s)", rc ? strerrorname_np(errno) : "ok");
	return vt_failures != 0;
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(cmd, "setup"))
		return do_setup();
	if (!strcmp(cmd, "security"))
		return do_security();
	if (!strcmp(cmd, "ext4"))
		return do_ext4();
	if (!strcmp(cmd, "tmpfs"))
		return do_tmpfs();
	if (!strcmp(cmd, "whiteout"))
		return do_whiteout();
	if (!strcmp(cmd, "behind"))
		return do_behind();
	if (!strcmp(cmd, "overlay"))
		return do_overlay();
	if (!strcmp(cmd, "pair") && argc == 4)
		return do_pair(argv[2], argv[3]);
	if (!strcmp(cmd, "populate") && argc == 4) {
		ops_populate(argv[2], argv[3]);
		return 0;
	}
	if (!strcmp(cmd, "stress") && argc == 3)
		return do_stress(atoi(argv[2]));
	fprintf(stderr, "usage: shiftfs-test setup|security|ext4|tmpfs|"
		"whiteout|behind|overlay|pair DEV DEV|stress SECS|populate DIR EXE\n");
	return 2;
}
