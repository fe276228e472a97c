// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The journal file itself: records encoded into a buffer, written out
 * and synced (by a thread of its own during an ext4 run), the header
 * that names the run and its target, and the whole file read back and
 * checked, record by record, for recovery, --status and --rollback.
 * The format is in shiftimg-journal(5); journal.c says why the order
 * of writes and syncs is what it is.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "journal-int.h"
#include "le.h"

/* ---- encoding ---- */

int si_journal_reserve(struct si_journal *j, size_t more)
{
	size_t cap = j->cap ? j->cap : j->kind == J_EXT4 ? BUF_EXT4 : BUF_FLUSH + 65536;
	unsigned char *p;

	if (j->len + more <= j->cap)
		return 0;
	while (cap < j->len + more)
		cap *= 2;
	p = si_alloc_big(&cap);
	if (!p)
		return -ENOMEM;
	if (j->len)
		memcpy(p, j->buf, j->len);
	free(j->buf);
	j->buf = p;
	j->cap = cap;
	return 0;
}

/* Starts a record of payload size len; returns where the payload goes. */
unsigned char *si_journal_rec_begin(struct si_journal *j, int type, size_t len)
{
	unsigned char *r;

	if (si_journal_reserve(j, R_HEAD + len + R_TAIL) < 0)
		return NULL;
	r = j->buf + j->len;
	put32(r, R_MAGIC);
	put16(r + 4, (uint16_t)type);
	put16(r + 6, 0);
	put32(r + 8, (uint32_t)len);
	put32(r + 12, 0);
	put64(r + 16, j->seq);
	return r + R_HEAD;
}

/* Ends the record begun at j->len; one never ended is not written. */
void si_journal_rec_end(struct si_journal *j, size_t len)
{
	unsigned char *r = j->buf + j->len;

	j->seq++;
	put64(r + R_HEAD + len, XXH64(r, R_HEAD + len, j->run_id));
	j->len += R_HEAD + len + R_TAIL;
	j->nrec++;
}

/* ---- writing and syncing ---- */

int si_journal_write_out(struct si_journal *j)
{
	size_t off = 0;

	while (off < j->len) {
		ssize_t n;

		si_fault(SI_FAULT_WRITE);
		n = pwrite(j->fd, j->buf + off, j->len - off, j->written);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			j->failed = true;
			return si_error(j->h, n < 0 ? errno : ENOSPC,
					"%s: writing the journal: %s", j->path,
					strerror(n < 0 ? errno : ENOSPC));
		}
		off += (size_t)n;
		j->written += n;
	}
	j->len = 0;
	return 0;
}

/*
 * Syncs the directory of path: its entries, or with whole_fs its whole
 * filesystem, which a removal needs where the filesystem has no journal
 * (the freed inode and bitmaps are not the directory's).
 */
int si_journal_sync_dir(struct shiftimg *h, const char *path, bool whole_fs)
{
	char *copy = strdup(path);
	int fd, err = 0;

	if (!copy)
		return si_error(h, ENOMEM, "out of memory");
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (whole_fs ? syncfs(fd) : fsync(fd)) < 0)
		err = si_error(h, errno, "%s: syncing its directory: %s", path,
			       strerror(errno));
	if (fd >= 0)
		close(fd);
	free(copy);
	return err;
}

/* Ends a batch: a commit record after its records, all written out. */
int si_journal_put_commit(struct si_journal *j, bool plan)
{
	unsigned char *p;

	if (j->failed)
		return -EIO;
	p = si_journal_rec_begin(j, REC_COMMIT, 12);
	if (!p)
		return si_error(j->h, ENOMEM, "out of memory");
	put64(p, j->nrec);
	put32(p + 8, plan);
	si_journal_rec_end(j, 12);
	return si_journal_write_out(j);
}

/* A sync of the journal's first to bytes is done (or failed with err). */
static int synced(struct si_journal *j, off_t to, int err)
{
	if (err) {
		j->failed = true;
		return si_error(j->h, err, "%s: syncing the journal: %s", j->path,
				strerror(err));
	}
	j->synced = to;
	if (!j->dir_synced) {
		err = si_journal_sync_dir(j->h, j->path, false);
		if (err)
			return err;
		j->dir_synced = true;
	}
	return 0;
}

/*
 * Commits what is written and makes it durable.  A tree's plan need only
 * be written back where the filesystem commits metadata in order
 * (j->ordered, see ordered_by_fs()): its size and blocks are then in a
 * commit no later than the first change of the apply pass, and its data,
 * written before that commit, is flushed with it; so no change reaches
 * the disk without the plan.  Anywhere else it is synced.
 */
int si_journal_commit(struct si_journal *j, bool plan)
{
	int err = si_journal_put_commit(j, plan);

	if (err)
		return err;
	si_fault(SI_FAULT_SYNC);
	if (plan && j->ordered) {
		if (sync_file_range(j->fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE |
				    SYNC_FILE_RANGE_WRITE |
				    SYNC_FILE_RANGE_WAIT_AFTER) < 0)
			return synced(j, j->written, errno);
		j->synced = j->written;
		return 0;
	}
	return synced(j, j->written, fdatasync(j->fd) < 0 ? errno : 0);
}

static void *syncer_main(void *arg)
{
	struct si_journal *j = arg;
	struct syncer *s = &j->sync;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		off_t want;
		int err;

		while (!s->stop && s->done == s->want)
			pthread_cond_wait(&s->cond, &s->lock);
		if (s->stop)
			break;
		want = s->want;
		pthread_mutex_unlock(&s->lock);
		err = fdatasync(j->fd) < 0 ? errno : 0;
		pthread_mutex_lock(&s->lock);
		if (err && !s->err)
			s->err = err;
		s->done = want;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/*
 * Starts the sync of everything written to the journal so far; without
 * a thread for it, syncs it here.
 */
int si_journal_sync_start(struct si_journal *j)
{
	struct syncer *s = &j->sync;

	si_fault(SI_FAULT_SYNC);
	if (!s->running) {
		pthread_mutex_init(&s->lock, NULL);
		pthread_cond_init(&s->cond, NULL);
		s->want = s->done = j->synced;
		s->running = !pthread_create(&s->thread, NULL, syncer_main, j);
		if (!s->running) {
			pthread_cond_destroy(&s->cond);
			pthread_mutex_destroy(&s->lock);
			return synced(j, j->written, fdatasync(j->fd) < 0 ? errno : 0);
		}
	}
	pthread_mutex_lock(&s->lock);
	s->want = j->written;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/*
 * Whether the journal's first to bytes are synced: 1 if so, 0 if not
 * yet (wait: false), or an error.  wait: true waits for it.
 */
int si_journal_sync_wait(struct si_journal *j, off_t to, bool wait)
{
	struct syncer *s = &j->sync;
	off_t done;
	int err;

	if (j->synced >= to)
		return 1;
	if (!s->running)
		return 1;	/* synced in si_journal_sync_start() */
	pthread_mutex_lock(&s->lock);
	while (wait && s->done < to && !s->err)
		pthread_cond_wait(&s->cond, &s->lock);
	done = s->done;
	err = s->err;
	pthread_mutex_unlock(&s->lock);
	if (!err && done < to)
		return 0;
	err = synced(j, done, err);
	return err ? err : 1;
}

void si_journal_sync_stop(struct si_journal *j)
{
	struct syncer *s = &j->sync;

	if (!s->running)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	s->running = false;
}

/* ---- the header ---- */

/*
 * The canonical text of the run's maps, as the user gave them: the map
 * alone, or "FROM -> MAP" for a re-shift (--from-map).
 */
char *si_journal_map_text(const struct shiftimg *h)
{
	int n = shiftimg_map_format(h, 0, NULL, 0);
	int f = shiftimg_map_format(h, SHIFTIMG_FROM, NULL, 0);
	char *s = malloc((size_t)(f + 4 + n + 1));

	if (!s)
		return NULL;
	if (f) {
		shiftimg_map_format(h, SHIFTIMG_FROM, s, (size_t)f + 1);
		strcpy(s + f, " -> ");
		f += 4;
	}
	shiftimg_map_format(h, 0, s + f, (size_t)n + 1);
	return s;
}

/*
 * The id of a tree's filesystem (statfs's f_fsid: ext4's comes from its
 * UUID), which outlives its device number; 0 if it has none.
 */
uint64_t si_journal_fs_id(int fd)
{
	struct statfs sfs;

	if (fstatfs(fd, &sfs) < 0)
		return 0;
	return (uint64_t)(uint32_t)sfs.f_fsid.__val[0] |
	       (uint64_t)(uint32_t)sfs.f_fsid.__val[1] << 32;
}

void si_journal_identity(const struct si_target *t, uint64_t *dev, uint64_t *ino)
{
	if (S_ISBLK(t->st.st_mode)) {
		*dev = 0;
		*ino = t->st.st_rdev;
	} else {
		*dev = t->st.st_dev;
		*ino = t->st.st_ino;
	}
}

int si_journal_write_header(struct si_journal *j, const char *map)
{
	size_t ml = strlen(map), sl = strlen(j->stamp_old);
	size_t len = J_HDR_FIXED + ml + sl;
	uint64_t dev, ino;
	unsigned char *p;

	if (si_journal_reserve(j, len + 8) < 0)
		return si_error(j->h, ENOMEM, "out of memory");
	p = j->buf;
	si_journal_identity(j->t, &dev, &ino);
	memset(p, 0, J_HDR_FIXED);
	memcpy(p, J_MAGIC, 16);
	put32(p + 16, J_VERSION);
	put32(p + 20, (uint32_t)j->kind);
	put64(p + 24, j->run_id);
	put64(p + 32, dev);
	put64(p + 40, ino);
	put64(p + 48, j->kind == J_EXT4 ? (uint64_t)j->t->st.st_size : si_journal_fs_id(j->t->fd));
	put64(p + 56, j->offset);
	put64(p + 64, j->h->flags & SHIFTIMG_REVERSE ? HDR_REVERSE : 0);
	put64(p + 72, (uint64_t)time(NULL));
	put32(p + 80, (uint32_t)ml);
	put32(p + 84, (uint32_t)sl);
	memcpy(p + J_HDR_FIXED, map, ml);
	memcpy(p + J_HDR_FIXED + ml, j->stamp_old, sl);
	put64(p + len, XXH64(p, len, 0));
	j->len = len + 8;
	return 0;
}

/* ---- reading a journal back ---- */

void si_journal_loaded_free(struct loaded *l)
{
	free(l->hdr.map);
	free(l->hdr.stamp);
	free(l->data);
	free(l->recs);
	memset(l, 0, sizeof(*l));
}

static int read_all(struct shiftimg *h, const char *path, int fd,
		    struct loaded *l)
{
	struct stat st;
	size_t off = 0;

	if (fstat(fd, &st) < 0)
		return si_error(h, errno, "%s: %s", path, strerror(errno));
	l->size = (size_t)st.st_size;
	l->data = malloc(l->size + 1);
	if (!l->data)
		return si_error(h, ENOMEM, "%s: out of memory", path);
	while (off < l->size) {
		ssize_t n = pread(fd, l->data + off, l->size - off, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return si_error(h, n < 0 ? errno : EIO, "%s: reading: %s",
					path, strerror(n < 0 ? errno : EIO));
		off += (size_t)n;
	}
	return 0;
}

static int parse_header(struct shiftimg *h, const char *path, struct loaded *l)
{
	const unsigned char *p = l->data;
	size_t ml, sl, len;

	/*
	 * The header is written before anything else and synced before
	 * the first change: a journal cut short inside it is a run that
	 * died while starting, and changed nothing.
	 */
	if (l->size < J_HDR_FIXED + 8 &&
	    !memcmp(p, J_MAGIC, l->size < 16 ? l->size : 16))
		return -ENODATA;
	if (l->size < J_HDR_FIXED + 8 || memcmp(p, J_MAGIC, 16))
		return si_error(h, EINVAL, "%s: not a shiftimg journal; refusing to touch the target (remove it if it is not one)",
				path);
	if (get32(p + 16) < J_VERSION_MIN || get32(p + 16) > J_VERSION)
		return si_error(h, EINVAL, "%s: journal version %u is not supported",
				path, get32(p + 16));
	ml = get32(p + 80);
	sl = get32(p + 84);
	len = J_HDR_FIXED + ml + sl;
	if (ml <= l->size && sl <= l->size && len + 8 > l->size)
		return -ENODATA;
	if (ml > l->size || sl > l->size || len + 8 > l->size ||
	    get64(p + len) != XXH64(p, len, 0))
		return si_error(h, EBADMSG, "%s: the journal's header is damaged (checksum mismatch): it cannot tell what the interrupted run did; refusing (see shiftimg-journal(5))",
				path);
	l->hdr.version = get32(p + 16);
	l->hdr.kind = (int)get32(p + 20);
	l->hdr.run_id = get64(p + 24);
	l->hdr.dev = get64(p + 32);
	l->hdr.ino = get64(p + 40);
	l->hdr.size = get64(p + 48);
	l->hdr.offset = get64(p + 56);
	l->hdr.flags = get64(p + 64);
	l->hdr.created = get64(p + 72);
	l->hdr.map = strndup((const char *)p + J_HDR_FIXED, ml);
	l->hdr.stamp = strndup((const char *)p + J_HDR_FIXED + ml, sl);
	l->hdr.len = len + 8;
	if (!l->hdr.map || !l->hdr.stamp)
		return si_error(h, ENOMEM, "out of memory");
	return 0;
}

/* The length of a valid record at off with sequence number seq, or 0. */
static size_t valid_rec(const struct loaded *l, size_t off, uint64_t seq)
{
	const unsigned char *r = l->data + off;
	size_t len;

	if (off + R_HEAD + R_TAIL > l->size || get32(r) != R_MAGIC)
		return 0;
	len = get32(r + 8);
	if (len > l->size - off - R_HEAD - R_TAIL || get64(r + 16) != seq ||
	    get64(r + R_HEAD + len) != XXH64(r, R_HEAD + len, l->hdr.run_id))
		return 0;
	return R_HEAD + len + R_TAIL;
}

/* Is there a valid record of this run anywhere past off? */
static bool valid_after(const struct loaded *l, size_t off, uint64_t seq)
{
	const unsigned char magic[4] = { 'J', 'R', 'C', '1' };

	for (size_t at = off + 1; at + R_HEAD + R_TAIL <= l->size; at++) {
		const unsigned char *m = memmem(l->data + at, l->size - at,
						magic, 4);
		uint64_t s;

		if (!m)
			return false;
		at = (size_t)(m - l->data);
		s = at + 24 <= l->size ? get64(m + 16) : 0;
		if (s > seq && s < seq + (1u << 30) && valid_rec(l, at, s))
			return true;
	}
	return false;
}

static int scan_records(struct shiftimg *h, const char *path, struct loaded *l)
{
	size_t off = l->hdr.len, cap = 0, pending = 0, n;
	uint64_t seq = 0;

	while ((n = valid_rec(l, off, seq))) {
		const unsigned char *r = l->data + off;

		if (get16(r + 4) == REC_COMMIT) {
			l->nr_recs += pending;
			pending = 0;
			if (get32(r + R_HEAD + 8))
				l->planned = true;
		} else {
			if (l->nr_recs + pending + 1 > cap) {
				size_t *p;

				cap = cap ? cap * 2 : 1024;
				p = realloc(l->recs, cap * sizeof(*p));
				if (!p)
					return si_error(h, ENOMEM, "out of memory");
				l->recs = p;
			}
			l->recs[l->nr_recs + pending++] = off;
		}
		off += n;
		seq++;
	}
	if (off < l->size || pending) {
		/* A torn tail is expected; a good record beyond a bad one is not. */
		if (off < l->size && valid_after(l, off, seq))
			return si_error(h, EBADMSG, "%s: the journal is damaged in the middle (a record at byte %zu fails its checksum): refusing to replay it (see shiftimg-journal(5))",
					path, off);
		l->torn = true;
	}
	return 0;
}

int si_journal_load(struct shiftimg *h, const char *path, int fd, struct loaded *l)
{
	int err;

	memset(l, 0, sizeof(*l));
	err = read_all(h, path, fd, l);
	if (!err)
		err = parse_header(h, path, l);
	if (!err)
		err = scan_records(h, path, l);
	if (err)
		si_journal_loaded_free(l);
	return err;
}
