// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * An ext4 image's journal: every in-place write recorded as the ranges
 * of bytes it changes (their old bytes, and a hash of the new ones),
 * queued in batches whose records are committed together and synced
 * while the next batches fill, and issued only once synced; then the
 * undo of an interrupted run, newest record first, and --status's
 * account of which side each write is on.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "journal-int.h"
#include "le.h"

/* ---- ext4 records ---- */

/* At least want bytes in *buf, of *cap; 0 or -ENOMEM. */
static int grow(unsigned char **buf, size_t *cap, size_t want)
{
	unsigned char *p;

	if (*cap >= want)
		return 0;
	p = realloc(*buf, want);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = want;
	return 0;
}

void si_journal_io_attach(struct si_journal *j, unsigned int bsz,
			  si_journal_write_fn *write, si_journal_read_fn *read,
			  void *arg)
{
	j->bsz = bsz;
	j->write_fn = write;
	j->read_fn = read;
	j->write_arg = arg;
	j->io_level = true;
}

void si_journal_blocks(struct si_journal *j, unsigned int bsz,
		       si_journal_write_fn *fn, void *arg)
{
	if (j->io_level) {
		/* The I/O layer journals: the backend's writes go straight to it. */
		j->backend_fn = fn;
		j->backend_arg = arg;
		return;
	}
	j->bsz = bsz;
	j->write_fn = fn;
	j->write_arg = arg;
}

/*
 * Bit i is set where old and new differ at byte i of these 64 bytes.
 * Inode tables change in a few bytes of each inode: most 64-byte
 * stretches are equal and cost one test.
 */
static inline uint64_t diff64(const unsigned char *old, const unsigned char *new)
{
	uint64_t m = 0;

#ifdef __SSE2__
	for (int k = 0; k < 4; k++) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(old + 16 * k));
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(new + 16 * k));
		unsigned int eq = (unsigned int)_mm_movemask_epi8(_mm_cmpeq_epi8(a, b));

		m |= (uint64_t)(~eq & 0xffffu) << (16 * k);
	}
#else
	for (int k = 0; k < 8; k++) {
		uint64_t a, b, d;

		memcpy(&a, old + 8 * k, 8);
		memcpy(&b, new + 8 * k, 8);
		d = le64toh(a) ^ le64toh(b);
		for (int i = 0; d; i++, d >>= 8)
			if (d & 0xff)
				m |= 1ull << (8 * k + i);
	}
#endif
	return m;
}

static size_t put_varint(unsigned char *p, uint64_t v)
{
	size_t n = 0;

	for (; v >= 0x80; v >>= 7)
		p[n++] = (unsigned char)(v | 0x80);
	p[n++] = (unsigned char)v;
	return n;
}

/* Reads a varint from p[*at] below end; false when it runs past end. */
static bool get_varint(const unsigned char *p, size_t end, size_t *at,
		       uint64_t *v)
{
	*v = 0;
	for (unsigned int shift = 0; *at < end && shift < 64; shift += 7) {
		unsigned char b = p[(*at)++];

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/* The ranges of one block record, as they are encoded. */
struct ranges {
	unsigned char *p;		/* where the next range goes */
	unsigned char *g;		/* where its new bytes go, in j->gather */
	size_t end;			/* end of the previous range in the write */
	uint32_t nr;
};

/* The most a slice of len bytes can take encoded (RANGE_GAP >= 1). */
#define RANGES_MAX(len)	(2 * (len) + 11 * ((len) / 2 + 1) + 16)

static inline unsigned char *put_v(unsigned char *p, uint64_t v)
{
	if (v < 0x80) {
		*p = (unsigned char)v;
		return p + 1;
	}
	return p + put_varint(p, v);
}

/* Copies exactly n bytes, in fixed-size moves when n is at most 16. */
static inline void copy_exact(unsigned char *d, const unsigned char *s, size_t n)
{
	if (n >= 8 && n <= 16) {
		memcpy(d, s, 8);
		memcpy(d + n - 8, s + n - 8, 8);
	} else if (n >= 4 && n < 8) {
		memcpy(d, s, 4);
		memcpy(d + n - 4, s + n - 4, 4);
	} else if (n >= 2 && n < 4) {
		memcpy(d, s, 2);
		memcpy(d + n - 2, s + n - 2, 2);
	} else {
		memcpy(d, s, n);
	}
}

/*
 * Appends one range, at byte base + start of the write: the gap since
 * the previous range, its length and its old bytes, and gathers its new
 * bytes for the record's hash; then puts the new bytes over the old
 * ones in buf, which becomes the new contents that way, with no copy of
 * the bytes that do not change.
 * Only the range's own bytes of buf change: the old bytes of the ranges
 * after it are still to be recorded.  Space for RANGES_MAX() of the
 * slice was reserved; buf can be read up to len.
 */
static inline __attribute__((always_inline)) void
put_range(struct ranges *r, unsigned char *buf,
			     const unsigned char *new, size_t base, size_t start,
			     size_t end, size_t len)
{
	size_t n = end - start;
	unsigned char *p = put_v(r->p, base + start - r->end);

	p = put_v(p, n);
	if (n <= 16 && start + 16 <= len) {
		/* Most ranges are a few bytes: fixed copies, no call. */
		memcpy(p, buf + start, 16);
		memcpy(r->g, new + start, 16);
	} else {
		memcpy(p, buf + start, n);
		memcpy(r->g, new + start, n);
	}
	copy_exact(buf + start, new + start, n);
	r->p = p + n;
	r->g += n;
	r->end = base + end;
	r->nr++;
}

/*
 * Encodes where buf (the old bytes) and new differ, in one pass over
 * the len bytes at byte base of the write, and leaves buf equal to new;
 * an unchanged stretch shorter than RANGE_GAP is taken into the range
 * around it (it costs no more than a range of its own).  A range never
 * spans two slices.
 */
static void put_ranges(struct ranges *r, unsigned char *buf,
		       const unsigned char *new, size_t base, size_t len)
{
	const unsigned char *old = buf;

	size_t c, start = 0, end = 0;
	bool open = false;

	for (c = 0; c < len; c += 64) {
		uint64_t m;

		if (c + 64 <= len) {
			m = diff64(old + c, new + c);
		} else {
			m = 0;
			for (size_t i = 0; c + i < len; i++)
				if (old[c + i] != new[c + i])
					m |= 1ull << i;
		}
		while (m) {
			unsigned int i = (unsigned int)__builtin_ctzll(m);
			uint64_t rest = ~(m >> i);
			unsigned int run = rest ? (unsigned int)__builtin_ctzll(rest) : 64 - i;
			size_t at = c + i;

			if (open && at - end < RANGE_GAP) {
				end = at + run;
			} else {
				if (open)
					put_range(r, buf, new, base, start, end, len);
				start = at;
				end = at + run;
				open = true;
			}
			m = i + run >= 64 ? 0 : m & (~0ull << (i + run));
		}
	}
	if (open)
		put_range(r, buf, new, base, start, end, len);
}

/* A size the tests may make small through the environment. */
static size_t tunable(const char *var, size_t dflt)
{
	const char *s = getenv(var);

	return s && atoi(s) > 0 ? (size_t)atoi(s) : dflt;
}

/* Writes per commit; SHIFTIMG_JOURNAL_BATCH makes batches small for tests. */
static size_t batch_recs(void)
{
	static size_t n;

	if (!n)
		n = tunable("SHIFTIMG_JOURNAL_BATCH", BATCH_RECS);
	return n;
}

/* Bytes of writes per commit; SHIFTIMG_JOURNAL_BYTES for tests. */
static size_t batch_bytes(void)
{
	static size_t n;

	if (!n)
		n = tunable("SHIFTIMG_JOURNAL_BYTES", BATCH_BYTES);
	return n;
}

/* Issues one committed write. */
static int issue(struct si_journal *j, uint64_t blk, unsigned int count,
		 const unsigned char *data)
{
	int err = 0;

	j->target_dirty = true;
	if (!si_fault_active()) {
		si_fault(SI_FAULT_WRITE);
		return j->write_fn(j->write_arg, blk, count, data);
	}
	/* Block by block, so that a fault can land inside a run. */
	for (unsigned int b = 0; b < count && !err; b++) {
		si_fault(SI_FAULT_WRITE);
		err = j->write_fn(j->write_arg, blk + b, 1, data + (size_t)b * j->bsz);
	}
	return err;
}

/*
 * Issues the writes of a batch whose commit is synced, and starts the
 * disk on them, so that the image's final sync has less left to do.
 */
static int drain(struct si_journal *j, struct batch *b)
{
	int err = 0;

	for (size_t i = 0; i < b->nr && !err; i++) {
		err = issue(j, b->q[i].blk, b->q[i].count, b->arena + b->q[i].at);
		if (!err && b->q[i].count > 1)
			sync_file_range(j->t->fd, (off64_t)(j->offset + b->q[i].blk * j->bsz),
					(off64_t)b->q[i].count * j->bsz,
					SYNC_FILE_RANGE_WRITE);
	}
	b->nr = 0;
	b->bytes = 0;
	return err;
}

static struct batch *open_batch(struct si_journal *j)
{
	return &j->bt[(j->head + j->nfl) % RING];
}

/*
 * Batches in flight at most: one under fault injection, so that the
 * write and sync points come in the same order in every run.
 */
static unsigned int ring_depth(void)
{
	return si_fault_active() ? 1 : RING - 1;
}

/*
 * Issues the writes of the oldest batches in flight whose commit is
 * synced, oldest first, so that a block written twice ends up with its
 * newest bytes.  With wait, waits for the oldest one's sync first; with
 * all, goes on until none is left in flight.
 */
static int land(struct si_journal *j, bool wait, bool all)
{
	while (j->nfl) {
		struct batch *b = &j->bt[j->head];
		int ret;

		ret = si_journal_sync_wait(j, b->jend, wait || all);
		if (ret <= 0)
			return ret;
		ret = drain(j, b);
		if (b->arena)
			j->spare[j->nspare++] = (struct spare){ b->arena, b->arena_cap };
		b->arena = NULL;
		b->arena_cap = 0;
		j->head = (j->head + 1) % RING;
		j->nfl--;
		if (ret)
			return ret;
		wait = false;
	}
	return 0;
}

/*
 * Commits the open batch: its records and a commit record go out in
 * one write(2), and their sync is started; the batch is then in
 * flight.  The oldest batch in flight is landed first when the ring is
 * full, and any whose sync has ended after.
 */
static int commit_batch(struct si_journal *j)
{
	struct batch *b = open_batch(j);
	int err;

	if (!b->nr && !j->len)
		return 0;
	if (j->nfl >= ring_depth() && (err = land(j, true, false)))
		return err;
	b = open_batch(j);
	err = si_journal_put_commit(j, false);
	if (!err)
		err = si_journal_sync_start(j);
	if (err)
		return err;
	b->jend = j->written;
	j->changed = true;
	j->nfl++;
	return si_fault_active() ? 0 : land(j, false, false);
}

/* Room for a write's len bytes at the end of the batch's arena. */
static unsigned char *arena_slot(struct si_journal *j, size_t len)
{
	struct batch *b = open_batch(j);

	if (b->nr == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		struct pending *q = realloc(b->q, cap * sizeof(*q));

		if (!q)
			return NULL;
		b->q = q;
		b->cap = cap;
	}
	if (!b->arena && j->nspare) {
		j->nspare--;
		b->arena = j->spare[j->nspare].arena;
		b->arena_cap = j->spare[j->nspare].cap;
	}
	if (b->bytes + len > b->arena_cap) {
		/*
		 * Room for a whole batch at once: growing it by doubling
		 * would copy into fresh pages, and clearing them costs more
		 * than the copy.
		 */
		size_t cap = b->arena_cap ? b->arena_cap : batch_bytes() + len;
		unsigned char *a;

		while (cap < b->bytes + len)
			cap *= 2;
		a = si_alloc_big(&cap);
		if (!a)
			return NULL;
		if (b->bytes)
			memcpy(a, b->arena, b->bytes);
		free(b->arena);
		b->arena = a;
		b->arena_cap = cap;
	}
	return b->arena + b->bytes;
}

/*
 * Encodes the ranges of a write a slice at a time, its old bytes read
 * (old NULL) or copied into dst, a slice at a time so that they are
 * still in the cache when compared; dst is left holding the new bytes.
 */
static int put_write(struct si_journal *j, struct ranges *r, uint64_t blk,
		     unsigned int count, const unsigned char *old,
		     const unsigned char *new, unsigned char *dst)
{
	unsigned int per = CHUNK / j->bsz ? CHUNK / j->bsz : 1;
	size_t head = (size_t)(r->p - (j->buf + j->len));
	int err = 0;

	for (unsigned int b = 0; b < count && !err; b += per) {
		unsigned int n = count - b < per ? count - b : per;
		size_t at = (size_t)b * j->bsz, len = (size_t)n * j->bsz;

		if (si_journal_reserve(j, head + RANGES_MAX(len) + R_TAIL) < 0)
			return -ENOMEM;
		r->p = j->buf + j->len + head;
		if (old)
			memcpy(dst + at, old + at, len);
		else
			err = j->read_fn(j->write_arg, blk + b, n, dst + at);
		if (!err)
			put_ranges(r, dst + at, new + at, at, len);
		head = (size_t)(r->p - (j->buf + j->len));
	}
	return err;
}

/*
 * Encodes the block record of a write (old NULL: read it), leaving its
 * new bytes in dst; 1 if it was recorded, 0 if nothing changes, or
 * -errno.
 */
static int put_block_rec(struct si_journal *j, uint64_t blk, unsigned int count,
			 const void *old, const void *new, unsigned char *dst)
{
	struct ranges r = { 0 };
	size_t len = (size_t)count * j->bsz, plen;
	unsigned char *p;
	int err;

	/* The new bytes of the ranges, hashed: at most the write, and a copy's overrun. */
	if (grow(&j->gather, &j->gather_cap, len + 16))
		return -ENOMEM;
	p = si_journal_rec_begin(j, REC_BLOCK, BLOCK_HEAD);
	if (!p)
		return -ENOMEM;
	r.p = p + BLOCK_HEAD;
	r.g = j->gather;
	err = put_write(j, &r, blk, count, old, new, dst);
	if (err || !r.nr)
		return err;
	p = j->buf + j->len;
	plen = (size_t)(r.p - p) - R_HEAD;
	put32(p + 8, (uint32_t)plen);
	put64(p + R_HEAD, j->offset + blk * j->bsz);
	put32(p + R_HEAD + 8, (uint32_t)len);
	put32(p + R_HEAD + 12, r.nr);
	put64(p + R_HEAD + 16, XXH64(j->gather, (size_t)(r.g - j->gather), j->run_id));
	si_journal_rec_end(j, plen);
	return 1;
}

/*
 * Records a write (old NULL: the old bytes are read here) and queues
 * it, its new bytes in the arena, until the batch holds BATCH_BYTES
 * or BATCH_RECS.  The full batch is committed (commit_batch()): its
 * records go out in one write(2) and are synced with one fdatasync(2),
 * in the journal's thread, while the next batches fill.
 */
static int journal_write(struct si_journal *j, uint64_t blk, unsigned int count,
			 const void *old, const void *new)
{
	size_t len = (size_t)count * j->bsz;
	struct batch *b = open_batch(j);
	unsigned char *dst;
	int ret;

	dst = arena_slot(j, len);
	ret = dst ? put_block_rec(j, blk, count, old, new, dst) : -ENOMEM;

	if (ret == 0)
		return 0;	/* nothing changes: nothing to write either */
	if (ret < 0) {
		if (ret != -ENOMEM)
			return si_error(j->h, -ret, "%s: reading blocks %" PRIu64 "-%" PRIu64 ": %s",
					j->t->path, blk, blk + count - 1,
					strerror(-ret));
		j->failed = true;
		return si_error(j->h, ENOMEM, "out of memory");
	}
	/* Queued: its new bytes are in the arena already. */
	b->q[b->nr++] = (struct pending){ blk, count, b->bytes };
	b->bytes += len;
	if (b->bytes < batch_bytes() && b->nr < batch_recs())
		return j->len >= BUF_MAX ? si_journal_write_out(j) : 0;
	return commit_batch(j);
}

int si_journal_io_block(struct si_journal *j, uint64_t blk, unsigned int count,
			const void *new)
{
	return journal_write(j, blk, count, NULL, new);
}

int si_journal_block(struct si_journal *j, uint64_t blk, unsigned int count,
		     const void *old, const void *new)
{
	/* Opened through the journal's I/O layer: that layer journals it. */
	if (j->io_level && j->backend_fn)
		return j->backend_fn(j->backend_arg, blk, count, new);
	return journal_write(j, blk, count, old, new);
}

int si_journal_flush(struct si_journal *j)
{
	int err;

	if (!j)
		return 0;
	err = commit_batch(j);
	return err ? err : land(j, true, true);
}

void si_journal_io_synced(struct si_journal *j)
{
	if (!j->nfl && !open_batch(j)->nr)
		j->target_dirty = false;
}

/* The newest version of block blk queued in batch b, if any. */
static const unsigned char *peek_batch(const struct si_journal *j,
				       const struct batch *b, uint64_t blk)
{
	for (size_t i = b->nr; i-- > 0;) {
		const struct pending *q = &b->q[i];

		if (blk >= q->blk && blk < q->blk + q->count)
			return b->arena + q->at + (size_t)(blk - q->blk) * j->bsz;
	}
	return NULL;
}

/* The open batch holds the newest writes, then those in flight, newest first. */
bool si_journal_peek(struct si_journal *j, uint64_t blk, void *buf)
{
	const unsigned char *p = peek_batch(j, open_batch(j), blk);

	for (unsigned int i = j->nfl; !p && i-- > 0;)
		p = peek_batch(j, &j->bt[(j->head + i) % RING], blk);

	if (p)
		memcpy(buf, p, j->bsz);
	return p != NULL;
}

/* A decoded block record: the ranges follow at p[at], below p[len]. */
struct block_rec {
	const unsigned char *p;
	uint64_t off;			/* byte offset of the write in the image */
	uint64_t hash;			/* v3: XXH64 of the ranges' new bytes */
	size_t wlen, at, len, end;
	uint32_t nr;
	bool with_new;			/* v2: each range's new bytes follow its old */
};

/* Opens a block record of a journal of the given version. */
static bool block_open(const unsigned char *r, uint32_t version,
		       struct block_rec *b)
{
	size_t head = version >= 3 ? BLOCK_HEAD : 16;

	b->p = r + R_HEAD;
	b->len = get32(r + 8);
	if (b->len < head)
		return false;
	b->off = get64(b->p);
	b->wlen = get32(b->p + 8);
	b->nr = get32(b->p + 12);
	b->hash = version >= 3 ? get64(b->p + 16) : 0;
	b->with_new = version < 3;
	b->at = head;
	b->end = 0;
	return true;
}

/*
 * The next range: start within the write, length, old bytes, and the
 * new bytes of a v2 record (else NULL).
 */
static bool block_next(struct block_rec *b, size_t *start, size_t *n,
		       const unsigned char **old, const unsigned char **new)
{
	uint64_t gap, len, stored;

	if (!get_varint(b->p, b->len, &b->at, &gap) ||
	    !get_varint(b->p, b->len, &b->at, &len) || !len ||
	    gap > b->wlen - b->end || len > b->wlen - b->end - gap)
		return false;
	stored = b->with_new ? 2 * len : len;
	if (stored > b->len - b->at)
		return false;
	*start = b->end + gap;
	*n = len;
	*old = b->p + b->at;
	*new = b->with_new ? b->p + b->at + len : NULL;
	b->at += stored;
	b->end = *start + len;
	return true;
}

/* Reads the bytes a block record's write covers into *buf (grown). */
static int block_read(int fd, const struct block_rec *b, unsigned char **buf,
		      size_t *cap)
{
	ssize_t n;

	if (grow(buf, cap, b->wlen))
		return -ENOMEM;
	n = pread(fd, *buf, b->wlen, (off_t)b->off);
	return n == (ssize_t)b->wlen ? 0 : n < 0 ? -errno : -EIO;
}

/*
 * Undoes one block record on the image: its write's bytes are read,
 * the old bytes of every range put back, and written in one go.
 */
static int block_undo(int fd, const unsigned char *r, uint32_t version,
		      unsigned char **buf, size_t *cap)
{
	struct block_rec b;
	const unsigned char *old, *new;
	size_t start, n;
	int err;

	if (!block_open(r, version, &b))
		return -EBADMSG;
	err = block_read(fd, &b, buf, cap);
	for (uint32_t i = 0; i < b.nr && !err; i++) {
		if (!block_next(&b, &start, &n, &old, &new))
			return -EBADMSG;
		memcpy(*buf + start, old, n);
	}
	if (err)
		return err;
	if (b.at != b.len)
		return -EBADMSG;	/* bytes past its last range */
	si_fault(SI_FAULT_WRITE);
	if (pwrite(fd, *buf, b.wlen, (off_t)b.off) != (ssize_t)b.wlen)
		return errno ? -errno : -EIO;
	return 0;
}

/* Opens the image for writing: the same file as the target's fd. */
static int reopen_rw(struct shiftimg *h, const struct si_target *t)
{
	char proc[64];
	int fd;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", t->fd);
	fd = open(proc, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return si_error(h, errno, "%s: %s", t->path, strerror(errno));
	return fd;
}

/* Undoes every committed block record, newest first; no sync. */
int si_journal_ext4_undo(struct shiftimg *h, const struct si_target *t,
			 const struct loaded *l)
{
	int fd = reopen_rw(h, t), err = 0;
	unsigned char *buf = NULL;
	size_t cap = 0;

	if (fd < 0)
		return fd;
	for (size_t i = l->nr_recs; i-- > 0 && !err;) {
		const unsigned char *r = l->data + l->recs[i];

		if (get16(r + 4) != REC_BLOCK)
			continue;
		err = block_undo(fd, r, l->hdr.version, &buf, &cap);
		if (err)
			err = si_error(h, -err, "%s: undoing journal record %zu: %s",
				       t->path, i, strerror(-err));
	}
	free(buf);
	close(fd);
	return err;
}

/* ---- --status ---- */

/* Which side of a block record the image is on: 0 old, 1 new, 2 neither. */
static int block_side(const unsigned char *r, const struct loaded *l,
		      const unsigned char *img, unsigned char *gather)
{
	struct block_rec b;
	const unsigned char *v[2];
	size_t start, n, g = 0;
	bool same[2] = { true, true };

	if (!block_open(r, l->hdr.version, &b))
		return 2;
	for (uint32_t i = 0; i < b.nr; i++) {
		if (!block_next(&b, &start, &n, &v[0], &v[1]))
			return 2;
		same[0] = same[0] && !memcmp(img + start, v[0], n);
		if (v[1])
			same[1] = same[1] && !memcmp(img + start, v[1], n);
		memcpy(gather + g, img + start, n);
		g += n;
	}
	if (b.at != b.len)
		return 2;
	/* v3 keeps only a hash of the new bytes: what the ranges hold now must match it. */
	if (!b.with_new)
		same[1] = XXH64(gather, g, l->hdr.run_id) == b.hash;
	return same[1] ? 1 : same[0] ? 0 : 2;
}

void si_journal_ext4_census(const struct si_target *t, const struct loaded *l,
			    uint64_t n[4])
{
	unsigned char *buf = NULL, *gather = NULL;
	size_t cap = 0, gcap = 0;

	for (size_t i = 0; i < l->nr_recs; i++) {
		const unsigned char *r = l->data + l->recs[i];
		struct block_rec b;

		if (!block_open(r, l->hdr.version, &b) ||
		    block_read(t->fd, &b, &buf, &cap) < 0) {
			n[3]++;
			continue;
		}
		/* The ranges never overlap: their bytes fit in the write's length. */
		if (grow(&gather, &gcap, b.wlen)) {
			n[3]++;
			continue;
		}
		n[block_side(r, l, buf, gather)]++;
	}
	free(gather);
	free(buf);
}
