// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The journal: a file beside the target that lets an interrupted
 * in-place shift be finished exactly once, or undone.  The format is in
 * shiftimg-journal(5); journal.h says how trees and images use it.
 *
 * Ordering is the whole point: nothing in the target changes before
 * the records that describe the change are on disk (written and
 * fdatasync'ed, the directory entry fsync'ed once), and the journal is
 * removed only after the target itself has been synced.  Every record
 * carries an XXH64 checksum seeded with the run's random id, so a torn
 * tail is recognised and ignored, and a record of another run never
 * passes for one of this run.
 *
 * This file drives a run: it finishes or refuses a journal an earlier
 * run left, checks the stamp, creates the journal, ends the run, and
 * shows or rolls back an interrupted one; fault injection for the tests
 * is here too.  The file's records are journal-file.c's, a tree's plan
 * journal-tree.c's, an image's writes journal-ext4.c's (and the I/O
 * layer under libext2fs journal-io.c's).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "journal-int.h"

/* ---- fault injection ---- */

static struct {
	pthread_once_t once;
	int kind;			/* -1 none, SI_FAULT_*, 2 any */
	uint64_t at;
	bool power;
	const char *log;
	_Atomic uint64_t n[2];
	void (*crash_fn)(void *);
	void *crash_arg;
} fault = { .once = PTHREAD_ONCE_INIT, .kind = -1 };

static void fault_log(void)
{
	FILE *f = fopen(fault.log, "we");

	if (!f)
		return;
	fprintf(f, "write %" PRIu64 " sync %" PRIu64 "\n",
		(uint64_t)fault.n[SI_FAULT_WRITE], (uint64_t)fault.n[SI_FAULT_SYNC]);
	fclose(f);
}

/* SHIFTIMG_FAULT=KIND:N[:power], KIND write, sync or any; N from 1. */
static void fault_init(void)
{
	const char *s = getenv("SHIFTIMG_FAULT");
	char kind[8];
	unsigned long long at;
	int used = 0;

	fault.log = getenv("SHIFTIMG_FAULT_LOG");
	if (fault.log)
		atexit(fault_log);
	if (!s || sscanf(s, "%7[a-z]:%llu%n", kind, &at, &used) != 2)
		return;
	fault.kind = !strcmp(kind, "write") ? SI_FAULT_WRITE :
		     !strcmp(kind, "sync") ? SI_FAULT_SYNC :
		     !strcmp(kind, "any") ? 2 : -1;
	fault.at = at;
	fault.power = !strcmp(s + used, ":power");
}

void si_fault(enum si_fault_kind kind)
{
	uint64_t n, all;

	pthread_once(&fault.once, fault_init);
	/* Uncounted when off: every worker would share one cache line. */
	if (fault.kind < 0 && !fault.log)
		return;
	n = ++fault.n[kind];
	if (fault.kind < 0)
		return;
	all = fault.n[0] + fault.n[1];
	if ((fault.kind == (int)kind && n == fault.at) ||
	    (fault.kind == 2 && all == fault.at)) {
		if (fault.log)
			fault_log();
		if (fault.crash_fn)
			fault.crash_fn(fault.crash_arg);
		raise(SIGKILL);
	}
}

/* Fault injection or counting is on: points are made finer. */
bool si_fault_active(void)
{
	pthread_once(&fault.once, fault_init);
	return fault.kind >= 0 || fault.log;
}

bool si_fault_power(void)
{
	pthread_once(&fault.once, fault_init);
	return fault.power;
}

void si_fault_on_crash(void (*fn)(void *), void *arg)
{
	fault.crash_fn = fn;
	fault.crash_arg = arg;
}

/* A power cut loses what was not synced; keep half of it, torn. */
static void journal_crash(void *arg)
{
	struct si_journal *j = arg;
	off_t keep = j->synced + (j->written - j->synced) / 2;

	if (fault.power && ftruncate(j->fd, keep) < 0)
		return;
}

/* ---- syncing the target ---- */

/*
 * Syncs the target: syncfs(2) for a tree, fsync(2) for an image (which
 * covers writes made through any descriptor of it).  A tree walked with
 * --cross-mounts may have changed other filesystems as well, which the
 * syncfs of its root's leaves alone: sync(2) takes them all first (it
 * reports no errors; the syncfs after it still does, for the root's).
 */
static int sync_target(struct shiftimg *h, const struct si_target *t, int kind)
{
	si_fault(SI_FAULT_SYNC);
	if (kind == J_TREE && (h->flags & SHIFTIMG_CROSS_MOUNTS))
		sync();
	if ((kind == J_TREE ? syncfs(t->fd) : fsync(t->fd)) < 0)
		return si_error(h, errno, "%s: syncing: %s", t->path, strerror(errno));
	return 0;
}

/*
 * True when the target's filesystem journals its metadata, as the kernel
 * runs it now: ext3 or ext4 with a journal (the sysfs journal_task of a
 * filesystem without one is "<none>").  Its commits reach the disk in
 * the order the changes were made, so a change that is on disk after a
 * crash has every earlier one with it.  Anything unknown answers false.
 */
static bool fs_journals_metadata(int fd, dev_t dev)
{
	char path[PATH_MAX + 64], link[PATH_MAX], task[16] = "";
	const char *name;
	struct statfs sfs;
	ssize_t n;
	int tfd;

	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != EXT4_SUPER_MAGIC)
		return false;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", major(dev),
		 minor(dev));
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return false;
	link[n] = '\0';
	name = strrchr(link, '/');
	snprintf(path, sizeof(path), "/sys/fs/ext4/%s/journal_task",
		 name ? name + 1 : link);
	tfd = open(path, O_RDONLY | O_CLOEXEC);
	if (tfd < 0)
		return false;
	n = read(tfd, task, sizeof(task) - 1);
	close(tfd);
	return n > 0 && task[0] >= '0' && task[0] <= '9';
}

/*
 * A tree run need not wait for the disk when the filesystem puts the
 * run's writes there in the order they were made: what it changes and
 * the journal are on one filesystem that journals metadata in order.
 * The plan is then on disk before any change (si_journal_commit()), and the
 * journal's removal after every change (si_journal_end()): after a crash, either the
 * journal is there to finish the run, or the whole run is on disk.
 * --sync waits all the same.
 */
static bool ordered_by_fs(const struct si_journal *j)
{
	struct stat st;

	if (j->kind != J_TREE ||
	    (j->h->flags & (SHIFTIMG_SYNC | SHIFTIMG_CROSS_MOUNTS)))
		return false;
	if (fstat(j->fd, &st) < 0 || st.st_dev != j->t->st.st_dev)
		return false;
	return fs_journals_metadata(j->t->fd, j->t->st.st_dev);
}

/* ---- the stamp value of a run ---- */

/* The stamp of a map text ("" stays ""), malloc'ed. */
static char *stamp_value(int kind, const char *map)
{
	char *out;

	/* The superblock has room for a digest of the map, not the map. */
	if (kind != J_EXT4 || !map[0])
		return strdup(map);
	if (asprintf(&out, "xxh64:%016" PRIx64,
		     (uint64_t)XXH64(map, strlen(map), 0)) < 0)
		return NULL;
	return out;
}

static int kind_of(const struct si_backend *b)
{
	return b == &si_tree_backend ? J_TREE : b == &si_ext4_backend ? J_EXT4 : 0;
}

static const struct si_backend *backend_of(int kind)
{
	return kind == J_TREE ? &si_tree_backend : &si_ext4_backend;
}

static uint64_t parse_offset(const struct shiftimg *h)
{
	const char *s = si_option(h, "offset");

	return s ? strtoull(s, NULL, 0) : 0;
}

/* ---- paths ---- */

static char *journal_path(const struct shiftimg *h, const char *target)
{
	const char *opt = si_option(h, "journal");
	size_t n = strlen(target);
	char *p;

	if (opt)
		return strdup(opt);
	while (n > 1 && target[n - 1] == '/')
		n--;
	if (asprintf(&p, "%.*s.shiftimg-journal", (int)n, target) < 0)
		return NULL;
	return p;
}

/* Removes the journal; durably, unless its removal is ordered anyway. */
static int unlink_journal(struct shiftimg *h, const char *path, bool durably)
{
	if (unlink(path) < 0 && errno != ENOENT)
		return si_error(h, errno, "%s: %s", path, strerror(errno));
	return durably ? si_journal_sync_dir(h, path, true) : 0;
}

static int remove_journal(struct shiftimg *h, const char *path)
{
	return unlink_journal(h, path, true);
}

/*
 * Puts the stamp before an interrupted run back (value) after a
 * rollback or an undo, syncs the target, and removes the journal.
 */
static int restore_end(struct shiftimg *h, const struct si_target *t, int kind,
		       uint64_t offset, const char *value, const char *jpath)
{
	int err = si_stamp_set(kind == J_TREE ? &si_tree_backend : &si_ext4_backend,
			       t, offset, value);

	if (err < 0)
		return si_error(h, -err, "%s: restoring the stamp: %s", t->path,
				strerror(-err));
	err = sync_target(h, t, kind);
	return err ? err : remove_journal(h, jpath);
}

/* ---- an existing journal ---- */

/*
 * Is the journal this target's?  A tree's filesystem may come back
 * under another device number (a loop or device-mapper device after a
 * reboot), and another filesystem may come under the old one: where the
 * journal has the filesystem's id, that and the root inode name the
 * tree, and the records' device is then taken for the new one.
 */
static int check_owner(struct shiftimg *h, const char *jpath,
		       const struct si_target *t, struct loaded *l, int kind)
{
	bool by_id = kind == J_TREE && l->hdr.version >= 4 && l->hdr.size;
	uint64_t dev, ino;

	si_journal_identity(t, &dev, &ino);
	if (l->hdr.kind != kind || l->hdr.ino != ino ||
	    (by_id ? l->hdr.size != si_journal_fs_id(t->fd) : l->hdr.dev != dev) ||
	    (kind == J_EXT4 && l->hdr.size != (uint64_t)t->st.st_size))
		return si_error(h, EEXIST, "%s: this journal belongs to another target (or the target was replaced); refusing (see shiftimg-journal(5))",
				jpath);
	if (by_id && l->hdr.dev != dev) {
		l->dev_was = si_journal_rec_dev((dev_t)l->hdr.dev);
		l->dev_now = si_journal_rec_dev((dev_t)dev);
	}
	return 0;
}

/*
 * A journal left by an interrupted run: finished (tree), undone before
 * running again (ext4), or refused when it is another run's.
 */
static int resume(struct shiftimg *h, const struct si_target *t, int kind,
		  const char *jpath, int jfd, const char *map,
		  const char *stamp)
{
	bool reverse = h->flags & SHIFTIMG_REVERSE;
	struct loaded l;
	uint64_t done = 0, replaced = 0;
	int err;

	err = si_journal_load(h, jpath, jfd, &l);
	if (err == -ENODATA)
		return remove_journal(h, jpath);
	if (err)
		return err;
	err = check_owner(h, jpath, t, &l, kind);
	if (err)
		goto out_free;
	if (strcmp(l.hdr.map, map) || !(l.hdr.flags & HDR_REVERSE) != !reverse) {
		err = si_error(h, EEXIST, "%s: an interrupted run with map '%s'%s is unfinished (journal %s): run that command again to finish it, or --rollback to undo it; refusing a run with map '%s'%s",
			       t->path, l.hdr.map,
			       l.hdr.flags & HDR_REVERSE ? " --reverse" : "",
			       jpath, map, reverse ? " --reverse" : "");
		goto out_free;
	}
	if (kind == J_TREE && l.planned) {
		err = si_journal_tree_replay(h, t, &l, 1, &done, &replaced);
		if (err)
			goto out_free;
		if (h->flags & SHIFTIMG_STAMP)
			err = si_stamp_set(&si_tree_backend, t, 0, stamp);
		if (err < 0)
			err = si_error(h, -err, "%s: writing the stamp: %s",
				       t->path, strerror(-err));
		else
			err = sync_target(h, t, kind);
		/* What goes with the shift goes before its journal, as in drive(). */
		if (!err && h->commit_fn)
			err = h->commit_fn(h, h->commit_arg);
		if (!err)
			err = remove_journal(h, jpath);
		if (!err) {
			snprintf(h->notice, sizeof(h->notice),
				 "%s: finished an interrupted run from its journal (%" PRIu64 " objects set to their planned state)",
				 t->path, done);
			si_journal_note_replaced(h, replaced);
			h->tally.st.changed = done;
			err = SI_JOURNAL_NOTHING;
		}
		goto out_free;
	}
	if (kind == J_EXT4) {
		err = si_journal_ext4_undo(h, t, &l);
		if (!err)
			err = restore_end(h, t, kind, l.hdr.offset, l.hdr.stamp, jpath);
		if (!err)
			snprintf(h->notice, sizeof(h->notice),
				 "%s: undid an interrupted run (%zu journaled writes) and ran it again",
				 t->path, l.nr_recs);
		goto out_free;
	}
	/* A tree whose plan never completed was not changed at all. */
	err = remove_journal(h, jpath);
out_free:
	si_journal_loaded_free(&l);
	return err;
}

/* ---- the stamp check ---- */

/*
 * The stamps the run goes between (si_stamp_texts()), in the target's
 * own form: j->stamp_new, and *from for si_stamp_judge().
 */
static int stamp_values(struct si_journal *j, char **from)
{
	char *ft = NULL, *tt = NULL;
	int err = si_stamp_texts(j->h, &ft, &tt);

	*from = NULL;
	if (!err) {
		*from = stamp_value(j->kind, ft);
		j->stamp_new = stamp_value(j->kind, tt);
	}
	free(ft);
	free(tt);
	if (err || !*from || !j->stamp_new)
		return si_error(j->h, ENOMEM, "out of memory");
	return 0;
}

static int check_stamp(struct shiftimg *h, const struct si_backend *b,
		       const struct si_target *t, uint64_t offset,
		       const char *from, const char *to, char *old, size_t size)
{
	int err = si_stamp_get(b, t, offset, old, size);

	if (err)
		return si_error(h, -err, "%s: reading the stamp: %s", t->path,
				strerror(-err));
	/* The stamp before the run is kept either way: --rollback restores it. */
	err = si_stamp_judge(h, t->path, old, from, to);
	return err == SI_STAMP_DONE ? SI_JOURNAL_NOTHING : err;
}

/* ---- the run ---- */

/* The run in progress on this thread: the I/O layer finds it here. */
static __thread struct si_journal *active;

struct si_journal *si_journal_active(void)
{
	return active;
}

static struct si_journal *journal_new(struct shiftimg *h,
				      const struct si_target *t, int kind)
{
	struct si_journal *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->h = h;
	j->t = t;
	j->kind = kind;
	j->fd = -1;
	pthread_mutex_init(&j->lock, NULL);
	return j;
}

static void journal_free(struct si_journal *j)
{
	if (!j)
		return;
	if (active == j)
		active = NULL;
	si_fault_on_crash(NULL, NULL);
	si_journal_sync_stop(j);
	for (int i = 0; i < RING; i++) {
		free(j->bt[i].q);
		free(j->bt[i].arena);
	}
	for (unsigned int i = 0; i < j->nspare; i++)
		free(j->spare[i].arena);
	if (j->fd >= 0)
		close(j->fd);
	free(j->buf);
	free(j->gather);
	free(j->path);
	free(j->stamp_old);
	free(j->stamp_new);
	pthread_mutex_destroy(&j->lock);
	free(j);
}

static int create(struct si_journal *j, const char *map)
{
	int err;

	j->fd = open(j->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (j->fd < 0)
		return si_error(j->h, errno, "%s: creating the journal: %s",
				j->path, strerror(errno));
	if (flock(j->fd, LOCK_EX | LOCK_NB) < 0)
		return si_error(j->h, errno, "%s: %s", j->path, strerror(errno));
	if (getrandom(&j->run_id, sizeof(j->run_id), 0) != sizeof(j->run_id))
		j->run_id = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	err = si_journal_write_header(j, map);
	j->rec_start = (off_t)j->len;
	if (!err)
		err = si_journal_write_out(j);
	if (!err)
		si_fault_on_crash(journal_crash, j);
	return err;
}

/* Opens an existing journal, locked; -ENOENT if there is none. */
static int open_existing(struct shiftimg *h, const char *path)
{
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? -ENOENT :
		       si_error(h, errno, "%s: %s", path, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int err = si_error(h, errno, "%s: another run holds the journal: %s",
				   path, strerror(errno));

		close(fd);
		return err;
	}
	return fd;
}

int si_journal_start(struct shiftimg *h, const struct si_backend *b,
		     const struct si_target *t, struct si_journal **jp)
{
	int kind = kind_of(b), jfd, err;
	struct si_journal *j;
	char *map = NULL, *from = NULL, *old = NULL;

	*jp = NULL;
	/* SHIFTIMG_JOURNAL=off: for measuring what the journal costs. */
	if (getenv("SHIFTIMG_JOURNAL") && !strcmp(getenv("SHIFTIMG_JOURNAL"), "off"))
		return 0;
	if (!kind || (h->flags & SHIFTIMG_DRY_RUN) ||
	    (kind == J_EXT4 && si_option(h, "output")))
		return 0;
	j = journal_new(h, t, kind);
	map = si_journal_map_text(h);
	if (!j || !map || !(j->path = journal_path(h, t->path))) {
		err = si_error(h, ENOMEM, "out of memory");
		goto out_free;
	}
	j->offset = kind == J_EXT4 ? parse_offset(h) : 0;
	err = stamp_values(j, &from);
	if (err)
		goto out_free;
	jfd = open_existing(h, j->path);
	if (jfd >= 0) {
		err = resume(h, t, kind, j->path, jfd, map, j->stamp_new);
		close(jfd);
		if (err)
			goto out_free;
	} else if (jfd != -ENOENT) {
		err = jfd;
		goto out_free;
	}
	old = malloc(SI_STAMP_MAX);
	if (!old) {
		err = si_error(h, ENOMEM, "out of memory");
		goto out_free;
	}
	err = check_stamp(h, b, t, j->offset, from, j->stamp_new, old,
			  SI_STAMP_MAX);
	if (err) {
		free(old);
		goto out_free;
	}
	if (!(h->flags & SHIFTIMG_STAMP))
		j->stamp_new[0] = '\0';
	j->stamp_old = old;
	err = create(j, map);
	if (err) {
		if (j->fd >= 0)
			unlink(j->path);
		goto out_free;
	}
	j->ordered = ordered_by_fs(j);
	free(map);
	free(from);
	*jp = j;
	active = j;
	return 0;
out_free:
	free(map);
	free(from);
	journal_free(j);
	return err;
}

int si_journal_end(struct si_journal *j, int err)
{
	struct shiftimg *h;
	bool ordered;
	int e;

	if (!j)
		return err;
	h = j->h;
	if (!err && j->kind == J_EXT4)
		err = si_journal_flush(j);
	if (err) {
		/*
		 * Once a batch is committed the target may have changed, and
		 * the journal's committed records still tell the truth even
		 * if a later write to it failed (a full disk): it stays, and
		 * recovery ignores its torn tail.
		 */
		if (j->changed)
			snprintf(h->notice, sizeof(h->notice),
				 "%s: the journal %s is kept: run the same command again to finish, or --rollback to undo",
				 j->t->path, j->path);
		else
			remove_journal(h, j->path);
		journal_free(j);
		return err;
	}
	/*
	 * The stamp, then one sync of the target for it and the run (a
	 * stamp on disk before the run's writes is harmless: as long as
	 * the journal is there, recovery redoes the plan or undoes the
	 * writes and puts the old stamp back), and only then may the
	 * journal go.  An image the I/O layer synced after its last write
	 * needs a sync only for the stamp; a tree whose filesystem puts the
	 * journal's removal on disk after the run needs none.
	 */
	if (h->flags & SHIFTIMG_STAMP) {
		e = si_stamp_set(backend_of(j->kind), j->t, j->offset, j->stamp_new);
		if (e < 0)
			err = si_error(h, -e, "%s: writing the stamp: %s",
				       j->t->path, strerror(-e));
		else if (e > 0)
			j->target_dirty = true;
	}
	ordered = !err && j->ordered;
	if (!err && !ordered && (j->kind == J_TREE || j->target_dirty))
		err = sync_target(h, j->t, j->kind);
	else if (!err)
		si_fault(SI_FAULT_SYNC);	/* the same points either way */
	if (!err) {
		si_fault(SI_FAULT_WRITE);
		/* A removed file's inode is freed only once it is closed. */
		si_journal_sync_stop(j);
		close(j->fd);
		j->fd = -1;
		err = unlink_journal(h, j->path, !ordered);
	}
	journal_free(j);
	return err;
}

/* ---- --status and --rollback ---- */

static int open_loaded(struct shiftimg *h, const char *target,
		       struct si_target *t, char **jpath, struct loaded *l)
{
	int fd, err;

	memset(t, 0, sizeof(*t));
	t->path = target;
	t->fd = open(target, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (t->fd < 0 || fstat(t->fd, &t->st) < 0) {
		err = si_error(h, errno, "%s: %s", target, strerror(errno));
		goto out_close;
	}
	*jpath = journal_path(h, target);
	if (!*jpath) {
		err = si_error(h, ENOMEM, "out of memory");
		goto out_close;
	}
	fd = open_existing(h, *jpath);
	if (fd == -ENOENT) {
		err = si_error(h, ENOENT, "%s: no journal (%s): no interrupted run to show or undo",
			       target, *jpath);
		goto out_free;
	}
	if (fd < 0) {
		err = fd;
		goto out_free;
	}
	err = si_journal_load(h, *jpath, fd, l);
	close(fd);
	if (err == -ENODATA) {
		/* Cut short in its header: the run changed nothing. */
		free(*jpath);
		*jpath = NULL;
		close(t->fd);
		t->fd = -1;
		return -ENODATA;
	}
	if (!err)
		err = check_owner(h, *jpath, t, l, l->hdr.kind == J_EXT4 ? J_EXT4 : J_TREE);
	if (!err)
		return 0;
	si_journal_loaded_free(l);
out_free:
	free(*jpath);
	*jpath = NULL;
out_close:
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	return err;
}

int si_journal_status(struct shiftimg *h, const char *target, FILE *out)
{
	struct si_target t;
	struct loaded l;
	char *jpath = NULL, when[64];
	uint64_t n[4] = { 0 };
	time_t created;
	int err;

	err = open_loaded(h, target, &t, &jpath, &l);
	if (err == -ENODATA) {
		fprintf(out, "journal: cut short while the run started: nothing in %s was changed; the next run or --rollback removes it\n",
			target);
		return 0;
	}
	if (err)
		return err;
	created = (time_t)l.hdr.created;
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime(&created));
	fprintf(out, "journal: %s\ntarget: %s (%s)\nmap: %s%s\nstarted: %s\n",
		jpath, target, l.hdr.kind == J_EXT4 ? "ext4" : "tree",
		l.hdr.map, l.hdr.flags & HDR_REVERSE ? " (--reverse)" : "", when);
	fprintf(out, "stamp before the run: %s\n", l.hdr.stamp[0] ? l.hdr.stamp : "none");
	if (l.hdr.kind == J_EXT4) {
		si_journal_ext4_census(&t, &l, n);
		fprintf(out, "committed block writes: %zu: %" PRIu64 " done, %" PRIu64
			" not yet written, %" PRIu64 " torn or changed since, %" PRIu64
			" unreadable\n", l.nr_recs, n[1], n[0], n[2], n[3]);
		fprintf(out, "next run: undoes the %zu writes, then shifts the image from the start\n",
			l.nr_recs);
	} else if (!l.planned) {
		fprintf(out, "plan: incomplete: nothing in the target was changed\n");
	} else {
		si_journal_tree_census(h, &t, &l, n);
		fprintf(out, "plan: %zu objects: %" PRIu64 " shifted, %" PRIu64
			" not yet shifted, %" PRIu64 " in another state, %" PRIu64
			" gone or replaced\n", l.nr_recs, n[1], n[0], n[2], n[3]);
		fprintf(out, "next run: sets every planned object to its new state\n");
	}
	if (l.torn)
		fprintf(out, "tail: an uncommitted, torn tail was ignored\n");
	fprintf(out, "--rollback: restores the %s as it was before the run\n",
		l.hdr.kind == J_EXT4 ? "image" : "tree");
	si_journal_loaded_free(&l);
	free(jpath);
	close(t.fd);
	return 0;
}

int si_journal_rollback(struct shiftimg *h, const char *target)
{
	struct si_target t;
	struct loaded l;
	char *jpath = NULL;
	uint64_t done = 0, replaced = 0;
	int err;

	err = open_loaded(h, target, &t, &jpath, &l);
	if (err == -ENODATA) {
		jpath = journal_path(h, target);
		err = jpath ? remove_journal(h, jpath) : -ENOMEM;
		if (!err)
			snprintf(h->notice, sizeof(h->notice),
				 "%s: the interrupted run had changed nothing; its journal was removed",
				 target);
		free(jpath);
		return err;
	}
	if (err)
		return err;
	if (l.hdr.kind == J_EXT4)
		err = si_journal_ext4_undo(h, &t, &l);
	else if (l.planned)
		err = si_journal_tree_replay(h, &t, &l, 0, &done, &replaced);
	if (!err && (l.hdr.kind == J_EXT4 || l.planned))
		err = restore_end(h, &t, l.hdr.kind == J_EXT4 ? J_EXT4 : J_TREE,
				  l.hdr.offset, l.hdr.stamp, jpath);
	else if (!err)
		err = remove_journal(h, jpath);
	if (!err)
		snprintf(h->notice, sizeof(h->notice),
			 "%s: rolled back the interrupted run (%zu journal records)",
			 target, l.nr_recs);
	if (!err)
		si_journal_note_replaced(h, replaced);
	si_journal_loaded_free(&l);
	free(jpath);
	close(t.fd);
	return err;
}
