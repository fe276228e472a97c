// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The directory-tree backend.
 *
 * The walk holds a file descriptor for every directory from the root
 * down and names nothing by a path: each entry is reached by one name
 * relative to its parent's descriptor, without following symlinks, so a
 * tree changed underneath us (a symlink swapped in for a directory)
 * cannot lead outside the root.  Paths exist only for messages.
 *
 * Workers share a small queue of opened directories; a worker that
 * finds the queue full walks the subdirectory itself, depth first, so
 * the number of open descriptors follows the depth of the tree and the
 * queue, never its size.  Memory follows the number of hard-linked
 * inodes (the set that shifts each one once), not the number of files.
 *
 * A journaled run walks once: the check pass writes the plan to the
 * journal, and the apply pass replays it from there (journal-tree.c).  An
 * unjournaled run that is checked first walks twice; the note of inodes
 * with id-bearing xattrs that its check pass leaves for the apply pass
 * is a filter of a fixed size (128 KB).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "backend.h"
#include "inoset.h"
#include "inotab.h"
#include "journal.h"

#define QUEUE_MAX	64		/* opened directories waiting for a worker */
#define DENTS_BIG	32768		/* getdents buffer near the root */
#define DENTS_SMALL	4096		/* and deeper down, where levels pile up */
#define DENTS_DEEP	32
/* A documented limit: deeper trees fail with a clear error. */
#define SI_TREE_MAX_DEPTH 100000
#define XA_MAX		4		/* id-bearing xattrs an object can have */
#define XA_VALUE_MAX	65536		/* XATTR_SIZE_MAX */
#define FLAGS_PINNED	(FS_IMMUTABLE_FL | FS_APPEND_FL)
/* Inodes with id-bearing xattrs the check pass notes for the apply pass. */
#define NOTE_BITS	(1u << 20)	/* a Bloom filter of 128 KB, two bits a key */
#define STATX_WANT	(STATX_TYPE | STATX_MODE | STATX_UID | STATX_GID | \
			 STATX_INO | STATX_NLINK | STATX_MNT_ID | STATX_CTIME)

struct si_note {
	_Atomic uint64_t w[NOTE_BITS / 64];
};

/* One id-bearing xattr of an object, as read and as it becomes. */
struct si_xa {
	char name[32];
	size_t inlen, outlen;
	unsigned char in[XA_VALUE_MAX];
	unsigned char out[SI_XATTR_OUT(XA_VALUE_MAX)];
};

/* The object being visited: reached as name in dirfd, or through fd. */
struct si_obj {
	int dirfd;
	int fd;			/* directories: their descriptor; else -1 */
	const char *name;
	struct statx sx;
	uint32_t uid, gid;	/* what the owner becomes */
	unsigned int nr_xa;
	struct si_xa *xa;	/* the worker's buffers */
	char bad[64];		/* the xattr that could not be parsed */
};

struct job {
	int fd;
	unsigned int depth;
	char *path;
};

struct walk {
	struct shiftimg *h;
	const struct si_rules *r;
	enum si_pass pass;
	bool dry, cross_mounts;
	uint64_t root_mnt;
	size_t rootlen;			/* of the root's path, to make paths relative */
	unsigned int max_depth;

	pthread_mutex_t lock;		/* queue, idle and the tally merge */
	pthread_cond_t cond;
	struct job queue[QUEUE_MAX];
	unsigned int nr_queued, idle, nr_workers;
	bool done;

	struct si_inoset links;		/* inodes with nlink > 1 already done */
	struct si_note *note;		/* check: inodes with id-bearing xattrs */
	struct si_note *noted;		/* apply: the check pass's note, or NULL */
	struct si_inotab *inotab;	/* ext2/3/4: which inodes have no xattrs */
	_Atomic uint64_t visited;
	uint64_t total;			/* for progress; 0 if unknown */
};

struct worker {
	struct walk *w;
	struct si_tally t;
	char *path;			/* the current directory, for messages */
	size_t len, cap;
	int cwd;			/* the directory this thread has fchdir'ed to */
	struct si_xa *xa;		/* XA_MAX value buffers, reused */
	uint64_t reported;		/* objects already added to w->visited */
	struct si_journal_batch plan;	/* check pass: records not yet appended */
	struct si_inotab_cache tab;	/* this thread's chunks of w->inotab */
};

/* ---- paths, for messages only ---- */

static int path_push(struct worker *k, const char *name, size_t *saved)
{
	size_t n = strlen(name), need = k->len + n + 2;

	if (need > k->cap) {
		size_t cap = k->cap ? k->cap : 256;
		char *p;

		while (cap < need)
			cap *= 2;
		p = realloc(k->path, cap);
		if (!p)
			return -ENOMEM;
		k->path = p;
		k->cap = cap;
	}
	*saved = k->len;
	if (k->len && k->path[k->len - 1] != '/')
		k->path[k->len++] = '/';
	memcpy(k->path + k->len, name, n + 1);
	k->len += n;
	return 0;
}

static void path_pop(struct worker *k, size_t saved)
{
	k->len = saved;
	k->path[saved] = '\0';
}

/* Records a failure on one object: the run goes on, and fails at the end. */
static void obj_error(struct worker *k, int err, const char *what)
{
	k->t.st.errors++;
	si_error(k->w->h, err, "%s: %s: %s", k->path, what, strerror(err));
}

/* ---- xattrs ---- */

/*
 * The xattr names of an object: through its descriptor, or by name from
 * the thread's working directory (fchdir'ed to the parent), since there
 * is no llistxattrat().  Returns the length, 0 if none, or -errno.
 */
static ssize_t list_xattrs(struct si_obj *o, char **buf, size_t *cap,
			   char **heap)
{
	ssize_t n;
	char *p;

	for (;;) {
		n = o->fd >= 0 ? flistxattr(o->fd, *buf, *cap) :
				 llistxattr(o->name, *buf, *cap);
		if (n >= 0)
			return n;
		if (errno == ENOTSUP)
			return 0;
		if (errno != ERANGE)
			return -errno;
		/* Longer than the caller's buffer: size it, on the heap. */
		n = o->fd >= 0 ? flistxattr(o->fd, NULL, 0) :
				 llistxattr(o->name, NULL, 0);
		if (n < 0)
			return -errno;
		p = realloc(*heap, (size_t)n + 1);
		if (!p)
			return -ENOMEM;
		*heap = *buf = p;
		*cap = (size_t)n + 1;
	}
}

static ssize_t get_xattr_sized(struct si_obj *o, const char *name, void *buf,
			       size_t size)
{
	ssize_t n = o->fd >= 0 ? fgetxattr(o->fd, name, buf, size) :
				 lgetxattr(o->name, name, buf, size);

	return n < 0 ? -errno : n;
}

/*
 * The kernel zeroes a buffer of the size asked for, so ask for a small
 * one first: ACLs and capabilities are rarely more than a few entries.
 */
static ssize_t get_xattr(struct si_obj *o, const char *name, void *buf,
			 size_t size)
{
	ssize_t n = get_xattr_sized(o, name, buf, size < 256 ? size : 256);

	return n == -ERANGE ? get_xattr_sized(o, name, buf, size) : n;
}

static uint64_t dev_of(const struct statx *sx)
{
	return ((uint64_t)sx->stx_dev_major << 32) | sx->stx_dev_minor;
}

/*
 * The check pass notes every inode that has an id-bearing xattr, so
 * that the apply pass after it lists the xattrs of those alone: most
 * trees have few, and a listing costs about as much as a stat.  The
 * note is a Bloom filter, so its size is fixed: an inode it wrongly
 * holds is only listed for nothing (about 1 in 5,000 with 6,000 noted
 * inodes, 1 in 30 with 100,000).
 */
static void note_bits(const struct statx *sx, uint32_t bit[2])
{
	uint64_t x = (sx->stx_ino ^ (dev_of(sx) << 40) ^ (dev_of(sx) >> 24)) *
		     0x9e3779b97f4a7c15ull;

	bit[0] = (uint32_t)(x >> 44);
	bit[1] = (uint32_t)(x >> 24) & (NOTE_BITS - 1);
}

static void note_xattrs(struct walk *w, const struct statx *sx)
{
	uint32_t bit[2];
	int i;

	if (!w->note)
		return;
	note_bits(sx, bit);
	for (i = 0; i < 2; i++)
		atomic_fetch_or_explicit(&w->note->w[bit[i] / 64],
					 1ull << (bit[i] % 64),
					 memory_order_relaxed);
}

static bool noted(const struct si_note *n, const struct statx *sx)
{
	uint32_t bit[2];
	int i;

	note_bits(sx, bit);
	for (i = 0; i < 2; i++)
		if (!(atomic_load_explicit(&n->w[bit[i] / 64],
					   memory_order_relaxed) &
		      (1ull << (bit[i] % 64))))
			return false;
	return true;
}

/*
 * An inode the check pass saw without id-bearing xattrs is not listed
 * again: an xattr added between the passes was not checked either (it
 * may hold an unmapped id) and is not in the journal's plan, so the
 * apply pass does exactly what the check pass planned.  Nor is one whose
 * entry in its filesystem's inode table shows none (inotab.c).
 */
static bool xattrs_wanted(struct worker *k, const struct statx *sx)
{
	const struct walk *w = k->w;

	if (S_ISLNK(sx->stx_mode))
		return false;
	if (w->noted && !noted(w->noted, sx))
		return false;
	return !si_inotab_plain(w->inotab, &k->tab, sx);
}

/* Reads and shifts the id-bearing xattrs into o->xa[]. */
static int read_xattrs(struct worker *k, struct si_obj *o)
{
	char stackbuf[1024], *names = stackbuf, *heap = NULL;
	size_t cap = sizeof(stackbuf);
	ssize_t len, off;
	bool noted = false;
	/* chown(2) drops security.capability: a value kept is written again. */
	bool owner = o->uid != o->sx.stx_uid || o->gid != o->sx.stx_gid;
	int err = 0;

	len = list_xattrs(o, &names, &cap, &heap);
	if (len < 0) {
		err = (int)len;
		goto out_free;
	}
	for (off = 0; off < len; off += (ssize_t)strlen(names + off) + 1) {
		const char *name = names + off;
		struct si_xa *x;
		ssize_t n;
		int res;

		if (si_xattr_kind(name) == SI_XA_NONE)
			continue;
		if (!noted)
			note_xattrs(k->w, &o->sx);
		noted = true;
		if (o->nr_xa == XA_MAX)
			break;
		x = &o->xa[o->nr_xa];
		n = get_xattr(o, name, x->in, sizeof(x->in));
		if (n == -ENODATA)
			continue;	/* removed since the listing */
		if (n < 0) {
			err = (int)n;
			goto out_free;
		}
		res = si_xattr(k->w->r, name, x->in, (size_t)n, x->out,
			       &x->outlen, &k->t);
		if (res < 0) {
			err = -EINVAL;
			snprintf(o->bad, sizeof(o->bad), "%s", name);
			goto out_free;
		}
		if (!(res & SI_CHANGED) && !(owner && si_xattr_kind(name) == SI_XA_CAP))
			continue;
		snprintf(x->name, sizeof(x->name), "%s", name);
		x->inlen = (size_t)n;
		o->nr_xa++;
	}
out_free:
	free(heap);
	return err;
}

/* Makes the thread's working directory the entry's parent. */
static int enter_parent(struct worker *k, int dirfd)
{
	if (k->cwd == dirfd)
		return 0;
	if (fchdir(dirfd) < 0)
		return -errno;
	k->cwd = dirfd;
	return 0;
}

/* ---- one object ---- */

/* 1 if another name of this inode was visited already, 0 if not, -ENOMEM. */
static int seen_link(struct walk *w, const struct statx *sx)
{
	int ret;

	if (S_ISDIR(sx->stx_mode) || sx->stx_nlink < 2)
		return 0;
	ret = si_inoset_add(&w->links, dev_of(sx), sx->stx_ino);
	return ret < 0 ? ret : !ret;
}

static void describe(struct worker *k, const struct si_obj *o)
{
	char what[256];
	int n = 0;
	unsigned int i;

	if (o->uid != o->sx.stx_uid || o->gid != o->sx.stx_gid)
		n += snprintf(what + n, sizeof(what) - (size_t)n,
			      "owner %u:%u -> %u:%u", o->sx.stx_uid,
			      o->sx.stx_gid, o->uid, o->gid);
	for (i = 0; i < o->nr_xa && n < (int)sizeof(what); i++)
		n += snprintf(what + n, sizeof(what) - (size_t)n, "%s%s",
			      n ? ", " : "", o->xa[i].name);
	si_list(k->w->h, k->path, what);
}

static void count_xattrs(struct si_tally *t, const struct si_obj *o)
{
	unsigned int i;

	for (i = 0; i < o->nr_xa; i++) {
		switch (si_xattr_kind(o->xa[i].name)) {
		case SI_XA_ACL:
			t->st.acls++;
			break;
		case SI_XA_CAP:
			t->st.caps++;
			break;
		case SI_XA_OVERRIDE:
			t->st.override_stat++;
			break;
		case SI_XA_NONE:
			break;
		}
	}
}

/* ---- changing an object ---- */

static int set_xattr(const struct si_obj *o, int fd, const struct si_xa *x)
{
	int ret;

	si_fault(SI_FAULT_WRITE);
	ret = fd >= 0 ? fsetxattr(fd, x->name, x->out, x->outlen, 0) :
			lsetxattr(o->name, x->name, x->out, x->outlen, 0);

	return ret < 0 ? -errno : 0;
}

/*
 * Regular files that need more than a chown are opened, so that every
 * change lands on the inode that was inspected.  Special files (rarely
 * more than an ACL) are changed by name from the parent.
 */
static int open_object(const struct si_obj *o, int *fd)
{
	struct stat st;

	*fd = openat(o->dirfd, o->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
		     O_NOCTTY | O_CLOEXEC);
	if (*fd < 0)
		return -errno;
	if (fstat(*fd, &st) < 0 || st.st_ino != o->sx.stx_ino) {
		close(*fd);
		*fd = -1;
		return -ESTALE;		/* replaced since we looked at it */
	}
	return 0;
}

static int unpin(int fd, const struct si_obj *o, unsigned int *flags)
{
	unsigned int f;

	if (fd < 0)
		return -EPERM;	/* flags live behind an open descriptor */
	if (ioctl(fd, FS_IOC_GETFLAGS, flags) < 0)
		return -errno;
	f = *flags & ~FLAGS_PINNED;
	si_fault(SI_FAULT_WRITE);
	if (ioctl(fd, FS_IOC_SETFLAGS, &f) < 0)
		return -errno;
	return 0;
}

/*
 * The order matters: chown(2) clears setuid/setgid and drops
 * security.capability, so the mode is restored after it and the
 * capability is written last.
 */
static int change(const struct si_obj *o, int fd)
{
	mode_t mode = o->sx.stx_mode;
	bool owner = o->uid != o->sx.stx_uid || o->gid != o->sx.stx_gid;
	const struct si_xa *cap = NULL;
	unsigned int i;
	int err;

	if (owner)
		si_fault(SI_FAULT_WRITE);
	if (owner && (fd >= 0 ? fchown(fd, o->uid, o->gid) :
		      fchownat(o->dirfd, o->name, o->uid, o->gid,
			       AT_SYMLINK_NOFOLLOW)) < 0)
		return -errno;
	for (i = 0; i < o->nr_xa; i++) {
		if (si_xattr_kind(o->xa[i].name) == SI_XA_CAP) {
			cap = &o->xa[i];
			continue;
		}
		err = set_xattr(o, fd, &o->xa[i]);
		if (err)
			return err;
	}
	if (owner && !S_ISDIR(mode) && (mode & (S_ISUID | S_ISGID)))
		si_fault(SI_FAULT_WRITE);
	if (owner && !S_ISDIR(mode) && (mode & (S_ISUID | S_ISGID)) &&
	    (fd >= 0 ? fchmod(fd, mode & 07777) :
	     fchmodat(o->dirfd, o->name, mode & 07777, AT_SYMLINK_NOFOLLOW)) < 0)
		return -errno;
	return cap ? set_xattr(o, fd, cap) : 0;
}

static int apply(struct worker *k, struct si_obj *o)
{
	bool pinned = o->sx.stx_attributes & (STATX_ATTR_IMMUTABLE |
					      STATX_ATTR_APPEND);
	bool special = (o->sx.stx_mode & (S_ISUID | S_ISGID)) || o->nr_xa;
	unsigned int flags = 0;
	int fd = o->fd, err;
	bool opened = false;

	if (fd < 0 && S_ISREG(o->sx.stx_mode) && (pinned || special)) {
		err = open_object(o, &fd);
		if (err)
			return err;
		opened = true;
	}
	if (pinned) {
		err = unpin(fd, o, &flags);
		if (err)
			goto out_close;
		k->t.st.flags_cleared++;
	}
	err = change(o, fd);
	if (pinned)
		si_fault(SI_FAULT_WRITE);
	if (pinned && ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0 && !err)
		err = -errno;
out_close:
	if (opened)
		close(fd);
	return err;
}

/*
 * Check pass of a journaled run: records the object's planned change
 * (its state before and after) so that an interrupted apply pass can
 * be finished or undone; the original flags come with it, so a crash
 * never leaves an immutable flag cleared for good.
 */
static int plan(struct worker *k, const struct si_obj *o)
{
	struct si_journal_xa xa[XA_MAX];
	const char *rel = k->path + k->w->rootlen;
	unsigned int i;

	if (*rel == '/')
		rel++;
	for (i = 0; i < o->nr_xa; i++)
		xa[i] = (struct si_journal_xa){
			.name = o->xa[i].name,
			.old = o->xa[i].in, .oldlen = o->xa[i].inlen,
			.new = o->xa[i].out, .newlen = o->xa[i].outlen,
		};
	return si_journal_tree(k->w->h->journal, &k->plan, *rel ? rel : ".",
			       &o->sx, o->uid, o->gid, o->nr_xa, xa);
}

/*
 * The privilege rule: true if the shift makes the object setuid or
 * setgid root, or gives it real root's capabilities (counted then).
 */
static bool grants_root(struct worker *k, const struct si_obj *o)
{
	int bits = si_grants_root(o->sx.stx_mode, o->sx.stx_uid,
				  o->sx.stx_gid, o->uid, o->gid);
	unsigned int i;

	for (i = 0; i < o->nr_xa; i++)
		if (si_xattr_kind(o->xa[i].name) == SI_XA_CAP)
			bits |= si_cap_grants_root(o->xa[i].in, o->xa[i].inlen,
						   o->xa[i].out, o->xa[i].outlen);
	if (bits)
		si_tally_privileged(&k->t, k->path);
	return bits != 0;
}

/* Appends the worker's planned records to the journal. */
static void plan_flush(struct worker *k)
{
	struct shiftimg *h = k->w->h;
	int err;

	if (!h->journal || !k->plan.len)
		return;
	err = si_journal_batch_flush(h->journal, &k->plan);
	if (err)
		k->t.st.errors++;	/* the message is on the handle */
}

/* Looks the object up, decides what changes, and (APPLY) changes it. */
static int visit(struct worker *k, struct si_obj *o)
{
	struct walk *w = k->w;
	int res, err;

	k->t.st.objects++;
	res = si_shift_id(w->r, SI_KUID, o->sx.stx_uid, &o->uid, &k->t);
	res |= si_shift_id(w->r, SI_KGID, o->sx.stx_gid, &o->gid, &k->t);

	if (xattrs_wanted(k, &o->sx)) {
		if (o->fd < 0) {
			err = enter_parent(k, o->dirfd);
			if (err)
				return err;
		}
		err = read_xattrs(k, o);
		if (err == -EINVAL) {
			k->t.pending = false;
			k->t.st.errors++;
			si_error(w->h, EINVAL, "%s: %s holds a malformed value; left unchanged",
				 k->path, o->bad);
			return 0;
		}
		if (err)
			return err;
	}
	si_tally_object(&k->t, k->path);
	/* Made privileged since the check pass refused nothing: left alone. */
	if (grants_root(k, o) && w->pass == SI_PASS_APPLY &&
	    si_check_privileged(w->h)) {
		k->t.st.errors++;
		si_error(w->h, EPERM, "%s: would grant real root after the shift; left unchanged (see --allow-privileged)",
			 k->path);
		return 0;
	}

	if (!(res & SI_CHANGED) && !o->nr_xa)
		return 0;
	k->t.st.changed++;
	count_xattrs(&k->t, o);
	if (w->dry || (w->h->list_fn && w->pass == SI_PASS_APPLY))
		describe(k, o);
	if (w->pass == SI_PASS_CHECK) {
		/* Counted as planned: a journaled run keeps these counts. */
		if (o->sx.stx_attributes & (STATX_ATTR_IMMUTABLE | STATX_ATTR_APPEND))
			k->t.st.flags_cleared++;
		return w->h->journal ? plan(k, o) : 0;
	}
	return apply(k, o);
}

static int stat_entry(int dirfd, const char *name, struct statx *sx)
{
	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
		  STATX_WANT, sx) < 0)
		return -errno;
	return 0;
}

/* ---- mounts ---- */

/* Filesystems never to descend into, even with --cross-mounts. */
static bool pseudo_fs(int fd)
{
	static const long banned[] = {
		PROC_SUPER_MAGIC, SYSFS_MAGIC, CGROUP_SUPER_MAGIC,
		CGROUP2_SUPER_MAGIC, DEVPTS_SUPER_MAGIC, SELINUX_MAGIC,
		BPF_FS_MAGIC, TRACEFS_MAGIC, DEBUGFS_MAGIC, SECURITYFS_MAGIC,
		EFIVARFS_MAGIC,
	};
	struct statfs sf;
	size_t i;

	if (fstatfs(fd, &sf) < 0)
		return true;
	for (i = 0; i < sizeof(banned) / sizeof(banned[0]); i++)
		if (sf.f_type == banned[i])
			return true;
	return false;
}

/* ---- directories ---- */

static int walk_dir(struct worker *k, int fd, unsigned int depth);

/* Hands a subdirectory to an idle worker if one waits; else walks it here. */
static int descend(struct worker *k, int fd, unsigned int depth)
{
	struct walk *w = k->w;

	pthread_mutex_lock(&w->lock);
	if (w->idle > 0 && w->nr_queued < QUEUE_MAX) {
		char *copy = strdup(k->path);

		if (copy) {
			w->queue[w->nr_queued++] = (struct job){ fd, depth, copy };
			pthread_cond_signal(&w->cond);
			pthread_mutex_unlock(&w->lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&w->lock);
	return walk_dir(k, fd, depth);
}

/* Opens a subdirectory, refusing mounts, and visits and walks it. */
static int enter_dir(struct worker *k, int dirfd, const char *name,
		     unsigned int depth)
{
	struct walk *w = k->w;
	struct si_obj o = { .dirfd = dirfd, .name = name, .xa = k->xa };
	int fd, err;

	if (depth > w->max_depth) {
		obj_error(k, ELOOP, "deeper than the walk's limit (raise RLIMIT_NOFILE)");
		return 0;
	}
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;	/* gone since the listing */
		obj_error(k, errno, "cannot open directory");
		return 0;
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_WANT, &o.sx) < 0) {
		obj_error(k, errno, "cannot stat");
		goto out_close;
	}
	if (o.sx.stx_mnt_id != w->root_mnt &&
	    (!w->cross_mounts || pseudo_fs(fd))) {
		k->t.st.skipped_mounts++;
		goto out_close;
	}
	if (w->h->skip && si_dirs_has(w->h->skip, dev_of(&o.sx), o.sx.stx_ino))
		goto out_close;
	o.fd = fd;
	err = visit(k, &o);
	if (err) {
		obj_error(k, -err, "cannot shift");
		goto out_close;
	}
	return descend(k, fd, depth + 1);

out_close:
	close(fd);
	return 0;
}

static int visit_entry(struct worker *k, int dirfd, const char *name,
		       unsigned char type, unsigned int depth)
{
	struct walk *w = k->w;
	struct si_obj o = { .dirfd = dirfd, .fd = -1, .name = name, .xa = k->xa };
	int err;

	if (type == DT_DIR)
		return enter_dir(k, dirfd, name, depth);
	err = stat_entry(dirfd, name, &o.sx);
	if (err == -ENOENT)
		return 0;
	if (err) {
		obj_error(k, -err, "cannot stat");
		return 0;
	}
	if (S_ISDIR(o.sx.stx_mode))
		return enter_dir(k, dirfd, name, depth);
	if (o.sx.stx_mnt_id != w->root_mnt && !w->cross_mounts) {
		k->t.st.skipped_mounts++;	/* a file bind-mounted here */
		return 0;
	}
	err = seen_link(w, &o.sx);
	if (err) {
		if (err < 0)
			obj_error(k, -err, "cannot track hard links");
		else
			k->t.st.hardlinks++;
		return 0;
	}
	err = visit(k, &o);
	if (err)
		obj_error(k, -err, "cannot shift");
	return 0;
}

/* Every 4096 objects a worker adds them to the shared count and reports. */
static void progress(struct worker *k)
{
	if (k->t.st.objects - k->reported < 4096)
		return;
	k->w->visited += k->t.st.objects - k->reported;
	k->reported = k->t.st.objects;
	si_progress(k->w->h, k->w->visited, k->w->total);
}

/* Walks the entries of an opened directory; closes fd. */
static int walk_dir(struct worker *k, int fd, unsigned int depth)
{
	/* Each level keeps its buffer while its children are walked. */
	size_t bufsz = depth < DENTS_DEEP ? DENTS_BIG : DENTS_SMALL;
	char *buf = malloc(bufsz);
	ssize_t n, off;
	int err = 0;

	if (!buf) {
		close(fd);
		return -ENOMEM;
	}

	while ((n = getdents64(fd, buf, bufsz)) > 0) {
		for (off = 0; off < n;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			size_t saved;

			off += d->d_reclen;
			if (d->d_name[0] == '.' && (!d->d_name[1] ||
			    (d->d_name[1] == '.' && !d->d_name[2])))
				continue;
			if (path_push(k, d->d_name, &saved) < 0) {
				err = -ENOMEM;
				goto out_free;
			}
			err = visit_entry(k, fd, d->d_name, d->d_type, depth);
			path_pop(k, saved);
			if (err)
				goto out_free;
			progress(k);
		}
	}
	if (n < 0)
		obj_error(k, errno, "cannot read directory");
out_free:
	free(buf);
	if (k->cwd == fd)
		k->cwd = -1;
	close(fd);
	return err;
}

/* ---- workers ---- */

static void *worker_main(void *arg)
{
	struct worker *k = arg;
	struct walk *w = k->w;

	/* A working directory of our own, for the by-name xattr calls. */
	unshare(CLONE_FS);
	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct job j;
		size_t saved;

		while (!w->nr_queued && !w->done) {
			w->idle++;
			if (w->idle == w->nr_workers) {
				w->done = true;	/* nobody left to queue work */
				pthread_cond_broadcast(&w->cond);
			} else {
				pthread_cond_wait(&w->cond, &w->lock);
			}
			w->idle--;
		}
		if (w->done && !w->nr_queued)
			break;
		j = w->queue[--w->nr_queued];
		pthread_mutex_unlock(&w->lock);

		k->len = 0;
		if (path_push(k, j.path, &saved) == 0)
			walk_dir(k, j.fd, j.depth);
		else
			close(j.fd);
		free(j.path);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	plan_flush(k);
	return NULL;
}

/* Raises the descriptor limit: one descriptor per level of depth. */
static unsigned int depth_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < 256)
		return 128;
	return (unsigned int)(rl.rlim_cur > SI_TREE_MAX_DEPTH + 128 ?
			      SI_TREE_MAX_DEPTH : rl.rlim_cur - 128);
}

static int run_workers(struct walk *w, int rootfd, const char *root)
{
	unsigned int i, n = si_threads(w->h);
	struct worker *ks = calloc(n, sizeof(*ks));
	pthread_t *tids = calloc(n, sizeof(*tids));
	pthread_attr_t attr;
	int err = 0;

	if (!ks || !tids) {
		err = -ENOMEM;
		goto out_free;
	}
	/* Deep trees recurse: give the walkers room. */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256u << 20);
	w->nr_workers = n;
	w->queue[w->nr_queued++] = (struct job){ rootfd, 0, strdup(root) };
	for (i = 0; i < n; i++) {
		ks[i].w = w;
		ks[i].cwd = -1;
		si_tally_init(&ks[i].t);
		ks[i].xa = malloc(XA_MAX * sizeof(*ks[i].xa));
		if (!ks[i].xa) {
			err = -ENOMEM;
			break;
		}
		if (pthread_create(&tids[i], &attr, worker_main, &ks[i])) {
			err = -EAGAIN;
			break;
		}
	}
	pthread_attr_destroy(&attr);
	n = i;
	if (err) {
		pthread_mutex_lock(&w->lock);
		w->nr_workers = n;
		if (w->idle == n && !w->nr_queued)
			w->done = true;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
	}
	for (i = 0; i < n; i++) {
		pthread_join(tids[i], NULL);
		si_tally_merge(&w->h->tally, &ks[i].t);
		si_tally_free(&ks[i].t);
		free(ks[i].path);
		free(ks[i].xa);
		si_inotab_cache_free(&ks[i].tab);
	}
	if (err && i < si_threads(w->h))
		free(ks[i].xa);
out_free:
	free(ks);
	free(tids);
	return err;
}

/* ---- the note, from the check pass to the apply pass ---- */

/*
 * A check pass with a walking apply pass to follow takes notes; the
 * apply pass reads them.  A journaled run's apply pass walks nothing.
 */
static void note_begin(struct walk *w)
{
	struct shiftimg *h = w->h;

	if (w->pass == SI_PASS_APPLY)
		w->noted = h->pass_state;	/* NULL: every inode is listed */
	else if (!(h->flags & SHIFTIMG_DRY_RUN) && !h->journal)
		w->note = calloc(1, sizeof(*w->note));
}

/* A complete note waits on the handle for the apply pass of this run. */
static void note_end(struct walk *w, bool ok)
{
	struct shiftimg *h = w->h;

	if (w->pass == SI_PASS_APPLY || !w->note)
		return;
	if (!ok) {
		free(w->note);
		return;
	}
	if (h->pass_state_free)
		h->pass_state_free(h->pass_state);
	h->pass_state = w->note;
	h->pass_state_free = free;
}

/*
 * The apply pass of a journaled run sets every object the check pass
 * planned to its recorded state, straight from the journal: the code
 * that would finish the run after a crash, and no second walk (no
 * stat or xattr listing of what the check pass has just read).  The
 * counts are the check pass's, less what has gone since.
 */
static int apply_plan(struct shiftimg *h)
{
	uint64_t gone;
	int err;

	si_tally_free(&h->tally);
	h->tally = h->checked;
	si_tally_init(&h->checked);
	h->planned = h->tally.st.changed;
	err = si_journal_tree_apply(h->journal, si_threads(h), &gone);
	h->tally.st.changed -= gone;
	return err;
}

/* Visits the root itself, then walks below it. */
static int walk_tree(struct shiftimg *h, const struct si_target *t,
		     enum si_pass pass)
{
	struct walk w = {
		.h = h, .r = &h->rules, .pass = pass,
		.dry = pass == SI_PASS_CHECK,
		.cross_mounts = h->flags & SHIFTIMG_CROSS_MOUNTS,
		.max_depth = depth_limit(),
		.total = pass == SI_PASS_APPLY ? h->planned : 0,
	};
	struct worker root = { .w = &w, .cwd = -1 };
	struct si_obj o = { .dirfd = -1, .name = "." };
	struct si_xa *xa = malloc(XA_MAX * sizeof(*xa));
	size_t saved;
	int fd, err;

	if (!xa)
		return si_error(h, ENOMEM, "out of memory");
	root.xa = o.xa = xa;
	fd = openat(t->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		free(xa);
		return si_error(h, errno, "%s: %s", t->path, strerror(errno));
	}
	if (pseudo_fs(fd)) {
		free(xa);
		close(fd);
		return si_error(h, EINVAL, "%s: a kernel pseudo filesystem; refusing",
				t->path);
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_WANT, &o.sx) < 0) {
		err = errno;
		free(xa);
		close(fd);
		return si_error(h, err, "%s: %s", t->path, strerror(err));
	}
	w.root_mnt = o.sx.stx_mnt_id;
	w.inotab = si_inotab_open(fd);
	w.rootlen = strlen(t->path);
	w.dry = (h->flags & SHIFTIMG_DRY_RUN) != 0;
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	si_inoset_init(&w.links);
	si_tally_init(&root.t);
	note_begin(&w);

	o.fd = fd;
	err = path_push(&root, t->path, &saved);
	if (!err)
		err = visit(&root, &o);
	if (err)
		obj_error(&root, -err, "cannot shift");
	plan_flush(&root);
	si_tally_merge(&h->tally, &root.t);
	si_tally_free(&root.t);
	si_inotab_cache_free(&root.tab);
	free(root.path);
	free(xa);

	err = run_workers(&w, fd, t->path);
	si_inotab_close(w.inotab);
	note_end(&w, !err && !h->tally.st.errors);
	si_inoset_free(&w.links);
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
	if (err)
		return si_error(h, -err, "%s: %s", t->path, strerror(-err));
	if (h->tally.st.errors)
		return -EIO;	/* the message of the first is on the handle */
	return 0;
}

static int tree_shift(struct shiftimg *h, const struct si_target *t,
		      enum si_pass pass)
{
	if (pass == SI_PASS_APPLY && h->journal)
		return apply_plan(h);
	return walk_tree(h, t, pass);
}

static bool tree_probe(const struct si_target *t)
{
	return t->fd >= 0 && S_ISDIR(t->st.st_mode);
}

const struct si_backend si_tree_backend = {
	.name = "tree",
	.probe = tree_probe,
	.shift = tree_shift,
};
