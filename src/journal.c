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
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "journal-int.h"
#include "le.h"

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
static bool fault_active(void)
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

/* The run in progress on this thread: the I/O layer finds it here. */
static __thread struct si_journal *active;

struct si_journal *si_journal_active(void)
{
	return active;
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
	if (!fault_active()) {
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
	return fault_active() ? 1 : RING - 1;
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
	return fault_active() ? 0 : land(j, false, false);
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
static int ext4_undo(struct shiftimg *h, const struct si_target *t,
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
		err = ext4_undo(h, t, &l);
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

static void ext4_census(const struct si_target *t, const struct loaded *l,
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
		ext4_census(&t, &l, n);
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
		err = ext4_undo(h, &t, &l);
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
