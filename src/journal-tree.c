// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A tree's journal: the plan the check pass records, an object at a
 * time (its owner, mode, pinning flags and changed xattrs before and
 * after), and the code that sets every planned object to one side of
 * it: the apply pass of a run, on several threads reading the plan back
 * as they go, the finishing of an interrupted run, and --rollback.
 * Objects are reached beneath the root without following symlinks, and
 * checked to be the inodes recorded.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <xxhash.h>

#include "journal-int.h"
#include "le.h"

/* ---- tree records ---- */

#define BATCH_FLUSH	(64u << 10)	/* a worker's records kept before appending */
#define PLAN_CHUNK	(256u << 10)	/* records an apply worker takes at a time */
#define DIR_CACHE	4		/* directories an apply worker keeps open */

/* Appends one encoded payload as a record of this run (j->lock held). */
static int append_rec(struct si_journal *j, int type, const void *payload,
		      size_t len)
{
	unsigned char *p = si_journal_rec_begin(j, type, len);

	if (!p)
		return si_error(j->h, ENOMEM, "out of memory");
	memcpy(p, payload, len);
	si_journal_rec_end(j, len);
	return 0;
}

int si_journal_batch_flush(struct si_journal *j, struct si_journal_batch *b)
{
	size_t off = 0;
	int err = 0;

	pthread_mutex_lock(&j->lock);
	while (!err && off < b->len) {
		size_t len = get32(b->buf + off);

		err = append_rec(j, REC_TREE, b->buf + off + 4, len);
		off += 4 + len;
	}
	if (!err && j->len >= BUF_FLUSH) {
		err = si_journal_write_out(j);
		/*
		 * Start writing the plan out now, so that the sync that
		 * ends it (and holds up the apply pass) has little left.
		 */
		if (!err)
			sync_file_range(j->fd, j->kicked, j->written - j->kicked,
					SYNC_FILE_RANGE_WRITE);
		j->kicked = j->written;
	}
	pthread_mutex_unlock(&j->lock);
	free(b->buf);
	memset(b, 0, sizeof(*b));
	return err;
}

/* Room for len more bytes in the batch. */
static unsigned char *batch_room(struct si_journal_batch *b, size_t len)
{
	unsigned char *p;
	size_t cap = b->cap ? b->cap : BATCH_FLUSH + 8192;

	if (b->len + len > b->cap) {
		while (cap < b->len + len)
			cap *= 2;
		p = realloc(b->buf, cap);
		if (!p)
			return NULL;
		b->buf = p;
		b->cap = cap;
	}
	p = b->buf + b->len;
	b->len += len;
	return p;
}

int si_journal_tree(struct si_journal *j, struct si_journal_batch *b,
		    const char *rel, const struct statx *sx, uint32_t uid,
		    uint32_t gid, unsigned int nr_xa,
		    const struct si_journal_xa *xa)
{
	size_t plen = strlen(rel), len = 44 + plen;
	unsigned char *p;
	unsigned int i;
	uint32_t pinned = 0;

	if (plen > UINT16_MAX)
		return si_error(j->h, ENAMETOOLONG,
				"%s/%s: a path of more than %u bytes cannot be journaled",
				j->t->path, rel, UINT16_MAX);
	for (i = 0; i < nr_xa; i++)
		len += 10 + strlen(xa[i].name) + xa[i].oldlen + xa[i].newlen;
	if (sx->stx_attributes & STATX_ATTR_IMMUTABLE)
		pinned |= FS_IMMUTABLE_FL;
	if (sx->stx_attributes & STATX_ATTR_APPEND)
		pinned |= FS_APPEND_FL;
	p = batch_room(b, 4 + len);
	if (!p)
		return si_error(j->h, ENOMEM, "out of memory");
	put32(p, (uint32_t)len);
	p += 4;
	put64(p, ((uint64_t)sx->stx_dev_major << 32) | sx->stx_dev_minor);
	put64(p + 8, sx->stx_ino);
	put32(p + 16, sx->stx_uid);
	put32(p + 20, sx->stx_gid);
	put32(p + 24, uid);
	put32(p + 28, gid);
	put32(p + 32, sx->stx_mode);
	put32(p + 36, pinned);
	put16(p + 40, (uint16_t)plen);
	put16(p + 42, (uint16_t)nr_xa);
	memcpy(p + 44, rel, plen);
	p += 44 + plen;
	for (i = 0; i < nr_xa; i++) {
		size_t nl = strlen(xa[i].name);

		put16(p, (uint16_t)nl);
		put32(p + 2, (uint32_t)xa[i].oldlen);
		put32(p + 6, (uint32_t)xa[i].newlen);
		memcpy(p + 10, xa[i].name, nl);
		memcpy(p + 10 + nl, xa[i].old, xa[i].oldlen);
		memcpy(p + 10 + nl + xa[i].oldlen, xa[i].new, xa[i].newlen);
		p += 10 + nl + xa[i].oldlen + xa[i].newlen;
	}
	return b->len >= BATCH_FLUSH ? si_journal_batch_flush(j, b) : 0;
}

int si_journal_planned(struct si_journal *j)
{
	int err;

	if (!j || j->kind != J_TREE)
		return 0;
	err = si_journal_commit(j, true);
	if (!err)
		j->changed = true;	/* from here on the apply pass may change it */
	return err;
}

/* A decoded tree record; path and values point into the record. */
struct tree_rec {
	uint64_t dev, ino;
	uint32_t uid[2], gid[2];	/* [0] before, [1] after */
	uint32_t mode, pinned;
	const char *path;		/* not NUL-terminated */
	size_t plen;
	unsigned int nr_xa;
	struct { char name[256]; const unsigned char *val[2]; size_t len[2]; } xa[8];
};

/* Decodes the payload p of len bytes. */
static bool decode_tree(const unsigned char *p, size_t len, struct tree_rec *o)
{
	size_t at;

	if (len < 44)
		return false;
	o->dev = get64(p);
	o->ino = get64(p + 8);
	o->uid[0] = get32(p + 16);
	o->gid[0] = get32(p + 20);
	o->uid[1] = get32(p + 24);
	o->gid[1] = get32(p + 28);
	o->mode = get32(p + 32);
	o->pinned = get32(p + 36);
	o->plen = get16(p + 40);
	o->nr_xa = get16(p + 42);
	if (44 + o->plen > len || !o->plen || o->nr_xa > 8 ||
	    memchr(p + 44, '\0', o->plen))
		return false;
	o->path = (const char *)p + 44;
	at = 44 + o->plen;
	for (unsigned int i = 0; i < o->nr_xa; i++) {
		size_t nl, ol, wl;

		if (at + 10 > len)
			return false;
		nl = get16(p + at);
		ol = get32(p + at + 2);
		wl = get32(p + at + 6);
		if (nl >= sizeof(o->xa[i].name) || at + 10 + nl + ol + wl > len)
			return false;
		memcpy(o->xa[i].name, p + at + 10, nl);
		o->xa[i].name[nl] = '\0';
		o->xa[i].val[0] = p + at + 10 + nl;
		o->xa[i].len[0] = ol;
		o->xa[i].val[1] = p + at + 10 + nl + ol;
		o->xa[i].len[1] = wl;
		at += 10 + nl + ol + wl;
	}
	return true;
}

static int openat_beneath(int dirfd, const char *rel, int flags, bool xdev)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC |
				    (flags & O_PATH ? 0 : O_NOCTTY)),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS | (xdev ? 0 : RESOLVE_NO_XDEV),
	};
	long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

/*
 * Opens the directory dir (len bytes, a path below root) without
 * following any symlink or leaving the root; a path longer than
 * PATH_MAX is opened a piece at a time, each below the last.
 */
static int open_dir_beneath(int root, const char *dir, size_t len, bool xdev)
{
	char piece[PATH_MAX];
	int at = root, fd = -ENOENT;

	while (len) {
		size_t n = len;

		if (n >= sizeof(piece)) {
			n = sizeof(piece) - 1;
			while (n && dir[n] != '/')
				n--;
			if (!n)
				return -ENAMETOOLONG;
		}
		memcpy(piece, dir, n);
		piece[n] = '\0';
		fd = openat_beneath(at, piece, O_PATH | O_DIRECTORY, xdev);
		if (at != root)
			close(at);
		if (fd < 0)
			return fd;
		at = fd;
		dir += n;
		len -= n;
		while (len && *dir == '/') {
			dir++;
			len--;
		}
	}
	return fd;
}

/*
 * One worker's way to the recorded objects: the directories it opened
 * last, since records come a directory at a time.
 */
struct replayer {
	struct shiftimg *h;
	const struct si_target *t;
	int side;			/* 1 redo, 0 undo */
	bool xdev;			/* the run may cross mounts */
	uint64_t dev_was, dev_now;	/* the root's device, recorded and now */
	struct {
		char *dir;
		size_t len;
		int fd;
		uint64_t used;
	} cache[DIR_CACHE];
	uint64_t tick;
	char *name;			/* the object's own name, NUL-terminated */
	size_t name_cap;
	struct tree_rec o;
	uint64_t done, gone, replaced, errors;
};

static void replayer_init(struct replayer *rp, struct shiftimg *h,
			  const struct si_target *t, int side,
			  const struct loaded *l)
{
	memset(rp, 0, sizeof(*rp));
	rp->h = h;
	rp->t = t;
	rp->side = side;
	rp->xdev = h->flags & SHIFTIMG_CROSS_MOUNTS;
	if (l) {
		rp->dev_was = l->dev_was;
		rp->dev_now = l->dev_now;
	}
	for (int i = 0; i < DIR_CACHE; i++)
		rp->cache[i].fd = -1;
}

static void replayer_free(struct replayer *rp)
{
	for (int i = 0; i < DIR_CACHE; i++) {
		if (rp->cache[i].fd >= 0)
			close(rp->cache[i].fd);
		free(rp->cache[i].dir);
	}
	free(rp->name);
}

/* A descriptor for the directory dir (len 0: the root); -errno. */
static int dir_fd(struct replayer *rp, const char *dir, size_t len)
{
	int i, victim = 0, fd;
	char *copy;

	if (!len)
		return rp->t->fd;
	for (i = 0; i < DIR_CACHE; i++) {
		if (rp->cache[i].fd >= 0 && rp->cache[i].len == len &&
		    !memcmp(rp->cache[i].dir, dir, len)) {
			rp->cache[i].used = ++rp->tick;
			return rp->cache[i].fd;
		}
		if (rp->cache[i].used < rp->cache[victim].used)
			victim = i;
	}
	fd = open_dir_beneath(rp->t->fd, dir, len, rp->xdev);
	if (fd < 0)
		return fd;
	copy = malloc(len);
	if (!copy) {
		close(fd);
		return -ENOMEM;
	}
	memcpy(copy, dir, len);
	if (rp->cache[victim].fd >= 0)
		close(rp->cache[victim].fd);
	free(rp->cache[victim].dir);
	rp->cache[victim].dir = copy;
	rp->cache[victim].len = len;
	rp->cache[victim].fd = fd;
	rp->cache[victim].used = ++rp->tick;
	return fd;
}

/*
 * The recorded object's directory and name ("" for the root itself,
 * reached through the root's descriptor).  Returns the directory's
 * descriptor, owned by the replayer, or -errno.
 */
static int locate(struct replayer *rp, const struct tree_rec *o,
		  const char **name)
{
	const char *slash = memrchr(o->path, '/', o->plen);
	size_t dlen = slash ? (size_t)(slash - o->path) : 0;
	const char *base = slash ? slash + 1 : o->path;
	size_t blen = o->plen - (size_t)(base - o->path);

	if (blen + 1 > rp->name_cap) {
		char *p = realloc(rp->name, blen + 1);

		if (!p)
			return -ENOMEM;
		rp->name = p;
		rp->name_cap = blen + 1;
	}
	if (o->plen == 1 && o->path[0] == '.') {
		rp->name[0] = '\0';
		*name = rp->name;
		return rp->t->fd;
	}
	if (!blen || (blen <= 2 && !memcmp(base, "..", blen)))
		return -EINVAL;		/* a name the walk never records */
	memcpy(rp->name, base, blen);
	rp->name[blen] = '\0';
	*name = rp->name;
	return dir_fd(rp, o->path, dlen);
}

static int set_xa(int fd, bool real, const char *name, const void *v, size_t n)
{
	char proc[64];

	if (real)
		return fsetxattr(fd, name, v, n, 0) < 0 ? -errno : 0;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return setxattr(proc, name, v, n, 0) < 0 ? -errno : 0;
}

/*
 * Sets one object to the recorded state (side 1 after, 0 before), in
 * the order the tree backend uses: owner, xattrs, the setuid/setgid
 * bits chown cleared, the capability chown dropped, and last the
 * immutable and append-only flags as they were.
 */
static int set_state(int fd, bool real, const struct tree_rec *o, int side)
{
	unsigned int flags = 0, f;
	bool pinned = false;
	int err = 0, cap = -1;

	if (real && ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 &&
	    (flags & PINNED || o->pinned)) {
		pinned = true;
		f = flags & ~PINNED;
		si_fault(SI_FAULT_WRITE);
		if ((flags & PINNED) && ioctl(fd, FS_IOC_SETFLAGS, &f) < 0)
			return -errno;
	}
	si_fault(SI_FAULT_WRITE);
	if (fchownat(fd, "", o->uid[side], o->gid[side],
		     AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		err = -errno;
		goto out_flags;
	}
	for (unsigned int i = 0; i < o->nr_xa && !err; i++) {
		if (!strcmp(o->xa[i].name, "security.capability")) {
			cap = (int)i;
			continue;
		}
		si_fault(SI_FAULT_WRITE);
		err = set_xa(fd, real, o->xa[i].name, o->xa[i].val[side],
			     o->xa[i].len[side]);
	}
	if (!err && !S_ISDIR(o->mode) && !S_ISLNK(o->mode) &&
	    (o->mode & (S_ISUID | S_ISGID))) {
		char proc[64];

		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		si_fault(SI_FAULT_WRITE);
		if ((real ? fchmod(fd, o->mode & 07777) :
		     chmod(proc, o->mode & 07777)) < 0)
			err = -errno;
	}
	if (!err && cap >= 0) {
		si_fault(SI_FAULT_WRITE);
		err = set_xa(fd, real, o->xa[cap].name, o->xa[cap].val[side],
			     o->xa[cap].len[side]);
	}
out_flags:
	if (pinned) {
		f = (flags & ~PINNED) | o->pinned;
		si_fault(SI_FAULT_WRITE);
		if (ioctl(fd, FS_IOC_SETFLAGS, &f) < 0 && !err)
			err = -errno;
	}
	return err;
}

/* A device number as a tree record holds it. */
uint64_t si_journal_rec_dev(dev_t dev)
{
	return ((uint64_t)major(dev) << 32) | minor(dev);
}

static bool same_inode(const struct replayer *rp, const struct stat *st,
		       const struct tree_rec *o)
{
	uint64_t dev = si_journal_rec_dev(st->st_dev);

	return st->st_ino == o->ino &&
	       (dev == o->dev ||
		(rp->dev_was && o->dev == rp->dev_was && dev == rp->dev_now));
}

/* Opens a recorded object, checking it is still the same inode. */
static int open_rec(struct replayer *rp, const struct tree_rec *o, bool *real)
{
	const char *name;
	struct stat st;
	int dfd, fd, rfd;

	dfd = locate(rp, o, &name);
	if (dfd < 0)
		return dfd;
	fd = openat_beneath(dfd, *name ? name : ".", O_PATH, rp->xdev);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || !same_inode(rp, &st, o)) {
		close(fd);
		return -ESTALE;
	}
	*real = false;
	if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
		rfd = openat_beneath(dfd, *name ? name : ".",
				     O_RDONLY | O_NONBLOCK, rp->xdev);
		if (rfd >= 0) {
			if (fstat(rfd, &st) == 0 && same_inode(rp, &st, o)) {
				close(fd);
				*real = true;
				return rfd;
			}
			close(rfd);
		}
	}
	return fd;
}

/*
 * An object whose change is its owner alone is chowned by name: a chown
 * cannot hand out privilege (the kernel clears setuid and setgid and
 * drops capabilities on it), so the only check that matters, never to
 * leave the root, is the directory's, made when it was opened.  Every
 * other object is opened and checked to be the inode recorded.
 */
static bool owner_only(const struct tree_rec *o)
{
	return !o->nr_xa && !o->pinned &&
	       (S_ISDIR(o->mode) || !(o->mode & (S_ISUID | S_ISGID)));
}

static int replay_owner(struct replayer *rp, const struct tree_rec *o)
{
	const char *name;
	int dfd = locate(rp, o, &name);

	if (dfd < 0)
		return dfd;
	si_fault(SI_FAULT_WRITE);
	if (fchownat(dfd, name, o->uid[rp->side], o->gid[rp->side],
		     AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH)) < 0)
		return -errno;
	return 0;
}

static int replay_full(struct replayer *rp, const struct tree_rec *o)
{
	bool real;
	int fd = open_rec(rp, o, &real), err;

	if (fd < 0)
		return fd;
	err = set_state(fd, real, o, rp->side);
	close(fd);
	return err;
}

/* Says what changes, as the walk lists it. */
static void list_rec(struct replayer *rp, const struct tree_rec *o)
{
	const int s = rp->side;
	char what[256], *path;
	int n = 0;

	if (o->uid[0] != o->uid[1] || o->gid[0] != o->gid[1])
		n = snprintf(what, sizeof(what), "owner %u:%u -> %u:%u",
			     o->uid[!s], o->gid[!s], o->uid[s], o->gid[s]);
	for (unsigned int i = 0; i < o->nr_xa && n < (int)sizeof(what); i++)
		n += snprintf(what + n, sizeof(what) - (size_t)n, "%s%s",
			      n ? ", " : "", o->xa[i].name);
	if (o->plen == 1 && o->path[0] == '.')
		path = strdup(rp->t->path);
	else if (asprintf(&path, "%s/%.*s", rp->t->path, (int)o->plen, o->path) < 0)
		path = NULL;
	if (path)
		si_list(rp->h, path, what);
	free(path);
}

/* Sets the object of one record (the payload p of len bytes). */
static void replay_rec(struct replayer *rp, const unsigned char *p, size_t len)
{
	struct tree_rec *o = &rp->o;
	int err;

	if (!decode_tree(p, len, o)) {
		rp->errors++;
		si_error(rp->h, EBADMSG, "%s: a journal record is malformed",
			 rp->t->path);
		return;
	}
	if (rp->h->list_fn)
		list_rec(rp, o);
	err = owner_only(o) ? replay_owner(rp, o) : replay_full(rp, o);
	if (err == -ENOENT) {
		rp->gone++;	/* removed since: nothing to set */
		return;
	}
	if (err == -ESTALE || err == -ELOOP || err == -ENOTDIR || err == -EXDEV) {
		/*
		 * Another inode by that name now, or a directory on its
		 * path is a symlink, a file or a mount now: not ours to set.
		 */
		rp->replaced++;
		return;
	}
	if (err) {
		rp->errors++;
		si_error(rp->h, -err, "%s/%.*s: %s", rp->t->path, (int)o->plen,
			 o->path, strerror(-err));
		return;
	}
	rp->done++;
}

/* Adds to the notice how many planned objects were found replaced. */
void si_journal_note_replaced(struct shiftimg *h, uint64_t replaced)
{
	size_t n = strlen(h->notice);

	if (replaced)
		snprintf(h->notice + n, sizeof(h->notice) - n,
			 "%s%" PRIu64 " planned objects were replaced by others since they were planned, and left alone",
			 n ? "; " : "", replaced);
}

/* Redo (side 1) or undo (side 0) every planned tree object; no sync. */
int si_journal_tree_replay(struct shiftimg *h, const struct si_target *t,
			   const struct loaded *l, int side, uint64_t *done,
			   uint64_t *replaced)
{
	struct replayer rp;

	replayer_init(&rp, h, t, side, l);
	for (size_t i = 0; i < l->nr_recs; i++) {
		const unsigned char *r = l->data + l->recs[i];

		if (get16(r + 4) != REC_TREE) {
			rp.errors++;
			si_error(h, EBADMSG, "%s: journal record %zu is not a tree record",
				 t->path, i);
			continue;
		}
		replay_rec(&rp, r + R_HEAD, get32(r + 8));
	}
	replayer_free(&rp);
	*done = rp.done;
	*replaced = rp.replaced;
	h->tally.st.errors += rp.errors;
	return rp.errors ? -EIO : 0;
}

/*
 * The apply pass reads the plan back from the journal file as it goes,
 * so that memory does not follow its size; workers take it a chunk of
 * whole records at a time, each record checked again on the way.
 */
struct plan_reader {
	struct si_journal *j;
	pthread_mutex_t lock;
	unsigned char *buf;
	size_t len, pos;
	off_t off;			/* of buf[len] in the file */
	uint64_t seq;
	bool end;
	int err;
	_Atomic uint64_t done;		/* records applied, for progress */
};

/* Makes at least want bytes available at pos, if the file has them. */
static int reader_fill(struct plan_reader *rd, size_t want)
{
	size_t cap = PLAN_CHUNK * 4;

	if (rd->len - rd->pos >= want)
		return 0;
	memmove(rd->buf, rd->buf + rd->pos, rd->len - rd->pos);
	rd->len -= rd->pos;
	rd->pos = 0;
	if (want > cap) {
		unsigned char *p = realloc(rd->buf, want);

		if (!p)
			return -ENOMEM;
		rd->buf = p;
		cap = want;
	}
	while (rd->len < want) {
		ssize_t n = pread(rd->j->fd, rd->buf + rd->len,
				  (want > cap ? want : cap) - rd->len, rd->off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EBADMSG;	/* the plan's commit is missing */
		rd->len += (size_t)n;
		rd->off += n;
	}
	return 0;
}

/* Copies the next whole records (as length, payload) into out. */
static size_t reader_next(struct plan_reader *rd, unsigned char *out,
			  size_t cap)
{
	size_t n = 0;

	pthread_mutex_lock(&rd->lock);
	while (!rd->end && !rd->err) {
		const unsigned char *r;
		size_t len;

		rd->err = reader_fill(rd, R_HEAD);
		if (rd->err)
			break;
		r = rd->buf + rd->pos;
		len = get32(r + 8);
		if (get32(r) != R_MAGIC || get64(r + 16) != rd->seq ||
		    len > (64u << 20)) {
			rd->err = -EBADMSG;
			break;
		}
		if (4 + len > cap - n && n)
			break;		/* the next chunk starts with it */
		rd->err = reader_fill(rd, R_HEAD + len + R_TAIL);
		if (rd->err)
			break;
		r = rd->buf + rd->pos;
		if (get64(r + R_HEAD + len) != XXH64(r, R_HEAD + len, rd->j->run_id)) {
			rd->err = -EBADMSG;
			break;
		}
		rd->pos += R_HEAD + len + R_TAIL;
		rd->seq++;
		if (get16(r + 4) == REC_COMMIT) {
			rd->end = get32(r + R_HEAD + 8) != 0;
			continue;
		}
		if (4 + len > cap) {
			rd->err = -E2BIG;
			break;
		}
		put32(out + n, (uint32_t)len);
		memcpy(out + n + 4, r + R_HEAD, len);
		n += 4 + len;
	}
	pthread_mutex_unlock(&rd->lock);
	return n;
}

struct applier {
	struct plan_reader *rd;
	struct replayer rp;
	pthread_t tid;
	bool started;
};

static void *apply_main(void *arg)
{
	struct applier *a = arg;
	unsigned char *chunk = malloc(PLAN_CHUNK + (64u << 10));
	size_t n;

	if (!chunk) {
		a->rp.errors++;
		si_error(a->rp.h, ENOMEM, "out of memory");
		return NULL;
	}
	while ((n = reader_next(a->rd, chunk, PLAN_CHUNK + (64u << 10)))) {
		uint64_t recs = 0;

		for (size_t off = 0; off < n; recs++) {
			size_t len = get32(chunk + off);

			replay_rec(&a->rp, chunk + off + 4, len);
			off += 4 + len;
		}
		si_progress(a->rp.h, atomic_fetch_add(&a->rd->done, recs) + recs,
			    a->rp.h->planned);
	}
	free(chunk);
	return NULL;
}

int si_journal_tree_apply(struct si_journal *j, unsigned int threads,
			  uint64_t *gone)
{
	struct shiftimg *h = j->h;
	struct plan_reader rd = { .j = j, .off = j->rec_start };
	struct applier *a;
	uint64_t errors = 0, replaced = 0;
	unsigned int i;
	int err = 0;

	*gone = 0;
	a = calloc(threads ? threads : 1, sizeof(*a));
	rd.buf = malloc(PLAN_CHUNK * 4);
	if (!a || !rd.buf) {
		err = si_error(h, ENOMEM, "out of memory");
		goto out_free;
	}
	pthread_mutex_init(&rd.lock, NULL);
	for (i = 0; i < (threads ? threads : 1); i++) {
		a[i].rd = &rd;
		replayer_init(&a[i].rp, h, j->t, 1, NULL);
		a[i].started = !pthread_create(&a[i].tid, NULL, apply_main, &a[i]);
		if (!a[i].started)
			apply_main(&a[i]);
	}
	for (i = 0; i < (threads ? threads : 1); i++) {
		if (a[i].started)
			pthread_join(a[i].tid, NULL);
		errors += a[i].rp.errors;
		*gone += a[i].rp.gone + a[i].rp.replaced;
		replaced += a[i].rp.replaced;
		replayer_free(&a[i].rp);
	}
	pthread_mutex_destroy(&rd.lock);
	if (rd.err) {
		errors++;
		si_error(h, -rd.err, "%s: reading the plan back from %s: %s",
			 j->t->path, j->path, strerror(-rd.err));
	}
	si_journal_note_replaced(h, replaced);
	h->tally.st.errors += errors;
	if (errors)
		err = -EIO;
out_free:
	free(rd.buf);
	free(a);
	return err;
}

/* ---- --status ---- */

/* How far the target got: which side each record's object is on. */
void si_journal_tree_census(struct shiftimg *h, const struct si_target *t,
			    const struct loaded *l, uint64_t n[4])
{
	struct replayer rp;
	struct tree_rec *o = &rp.o;

	replayer_init(&rp, h, t, 1, l);
	for (size_t i = 0; i < l->nr_recs; i++) {
		const unsigned char *r = l->data + l->recs[i];
		const char *name;
		struct stat st;
		int dfd;

		if (!decode_tree(r + R_HEAD, get32(r + 8), o))
			continue;
		dfd = locate(&rp, o, &name);
		if (dfd < 0 || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW |
				       (*name ? 0 : AT_EMPTY_PATH)) < 0 ||
		    !same_inode(&rp, &st, o)) {
			n[3]++;
		} else if (st.st_uid == o->uid[1] && st.st_gid == o->gid[1] &&
			   (o->uid[0] != o->uid[1] || o->gid[0] != o->gid[1])) {
			n[1]++;
		} else if (st.st_uid == o->uid[0] && st.st_gid == o->gid[0]) {
			n[0]++;
		} else {
			n[2]++;
		}
	}
	replayer_free(&rp);
}
