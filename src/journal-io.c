// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The libext2fs io_manager the ext4 backend opens images with.  It sits
 * on unix_io and is the one path every write of libext2fs takes, the
 * backend's own block runs as well as quota files, inodes, bitmaps and
 * superblocks written by the library:
 *
 * - with a journal, each write is handed to the journal, which reads
 *   the bytes it replaces through this layer, records both and issues
 *   the write once its record is durable; reads see the writes still
 *   queued;
 * - under SHIFTIMG_FAULT=KIND:N:power (the fault tests) it also keeps
 *   every issued write in memory until the next flush, so that dying at
 *   the fault loses them, exactly as a power cut loses what a disk had
 *   not yet written.
 *
 * Without either it is not used: the backend gets unix_io itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include "journal.h"

#define SLOTS_MIN	1024

/* A block written since the last flush (power-loss mode only). */
struct lost {
	unsigned long long blk;		/* ~0: empty */
	unsigned char *data;
};

struct sio {
	io_channel real;
	struct si_journal *j;
	bool power;
	struct lost *slot;		/* open addressing by block number */
	size_t cap, nr;
	bool dirty;			/* written since the last sync */
	bool nocache;			/* unix_io keeps no block of its own */
};

static struct struct_io_manager sio_manager;

/* ---- the power-loss overlay ---- */

static size_t slot_of(const struct sio *p, unsigned long long blk)
{
	size_t i = (size_t)(blk * 0x9e3779b97f4a7c15ull) & (p->cap - 1);

	while (p->slot[i].blk != ~0ull && p->slot[i].blk != blk)
		i = (i + 1) & (p->cap - 1);
	return i;
}

static errcode_t grow(struct sio *p)
{
	struct lost *old = p->slot;
	size_t cap = p->cap;

	p->cap = cap ? cap * 2 : SLOTS_MIN;
	p->slot = malloc(p->cap * sizeof(*p->slot));
	if (!p->slot) {
		p->slot = old;
		p->cap = cap;
		return EXT2_ET_NO_MEMORY;
	}
	for (size_t i = 0; i < p->cap; i++)
		p->slot[i] = (struct lost){ ~0ull, NULL };
	for (size_t i = 0; i < cap; i++)
		if (old[i].blk != ~0ull)
			p->slot[slot_of(p, old[i].blk)] = old[i];
	free(old);
	return 0;
}

static errcode_t keep_block(struct sio *p, unsigned long long blk,
			    const void *data, size_t bsz)
{
	size_t s;
	errcode_t err;

	if ((p->nr + 1) * 2 > p->cap && (err = grow(p)))
		return err;
	s = slot_of(p, blk);
	if (p->slot[s].blk == ~0ull) {
		p->slot[s].data = malloc(bsz);
		if (!p->slot[s].data)
			return EXT2_ET_NO_MEMORY;
		p->slot[s].blk = blk;
		p->nr++;
	}
	memcpy(p->slot[s].data, data, bsz);
	return 0;
}

/* Puts the kept blocks on the image and flushes it. */
static errcode_t overlay_flush(struct sio *p)
{
	errcode_t err = 0;

	for (size_t i = 0; i < p->cap; i++) {
		if (p->slot[i].blk == ~0ull)
			continue;
		if (!err)
			err = io_channel_write_blk64(p->real, p->slot[i].blk, 1,
						     p->slot[i].data);
		free(p->slot[i].data);
		p->slot[i] = (struct lost){ ~0ull, NULL };
	}
	p->nr = 0;
	return err;
}

/* ---- below the journal: the image, or the overlay on it ---- */

static errcode_t lower_read(io_channel ch, unsigned long long blk, int count,
			    void *data)
{
	struct sio *p = ch->private_data;
	size_t bsz = (size_t)ch->block_size;
	errcode_t err = io_channel_read_blk64(p->real, blk, count, data);

	if (err || !p->nr)
		return err;
	for (int i = 0; i < count; i++) {
		size_t s = slot_of(p, blk + (unsigned int)i);

		if (p->slot[s].blk != ~0ull)
			memcpy((unsigned char *)data + (size_t)i * bsz,
			       p->slot[s].data, bsz);
	}
	return 0;
}

static errcode_t lower_write(io_channel ch, unsigned long long blk, int count,
			     const void *data)
{
	struct sio *p = ch->private_data;
	size_t bsz = (size_t)ch->block_size;
	errcode_t err = 0;

	p->dirty = true;
	if (!p->power)
		return io_channel_write_blk64(p->real, blk, count, data);
	for (int i = 0; i < count && !err; i++)
		err = keep_block(p, blk + (unsigned int)i,
				 (const unsigned char *)data + (size_t)i * bsz, bsz);
	return err;
}

static int to_errno(errcode_t err)
{
	return err ? (err < 4096 ? -(int)err : -EIO) : 0;
}

/* The journal's way to issue a committed write. */
static int issue(void *arg, uint64_t blk, unsigned int count, const void *buf)
{
	return to_errno(lower_write(arg, blk, (int)count, buf));
}

static errcode_t read_now(io_channel ch, unsigned long long blk, int count,
			  void *data);

/* The journal's way to read the old bytes of a write. */
static int read_old(void *arg, uint64_t blk, unsigned int count, void *buf)
{
	return to_errno(read_now(arg, blk, (int)count, buf));
}

/* ---- the channel ---- */

static errcode_t sio_open(const char *name, int flags, io_channel *chp)
{
	io_channel ch = calloc(1, sizeof(*ch));
	struct sio *p = calloc(1, sizeof(*p));
	errcode_t err;

	if (!ch || !p || !(ch->name = strdup(name))) {
		err = EXT2_ET_NO_MEMORY;
		goto out_free;
	}
	p->j = si_journal_active();
	p->power = si_fault_power();
	err = unix_io_manager->open(name, flags, &p->real);
	if (!err && p->power)
		err = grow(p);
	if (err)
		goto out_free;
	ch->magic = EXT2_ET_MAGIC_IO_CHANNEL;
	ch->manager = &sio_manager;
	ch->private_data = p;
	ch->block_size = p->real->block_size;
	ch->refcount = 1;
	ch->flags = p->real->flags;
	if (p->j) {
		si_journal_io_attach(p->j, (unsigned int)ch->block_size, issue,
				     read_old, ch);
		/*
		 * Every write then reaches the file at once, and a flush
		 * need not sync it (see sio_flush).
		 */
		p->nocache = p->real->manager->set_option &&
			     !p->real->manager->set_option(p->real, "cache", "off");
	}
	*chp = ch;
	return 0;
out_free:
	if (p && p->real)
		io_channel_close(p->real);
	if (p)
		free(p->slot);
	free(p);
	if (ch)
		free(ch->name);
	free(ch);
	return err;
}

/*
 * Commits and issues what the journal holds, then flushes the image,
 * unless nothing was written since the last flush: libext2fs flushes
 * more often than it writes (on open, on close after a flush), and
 * each fsync(2) costs a device cache flush.  A journaled run's writes
 * need no order among themselves (the journal undoes them all), only
 * to be on disk before the journal goes: the image is then synced once,
 * by the journal at the end of the run, together with the stamp.
 */
static errcode_t sio_flush(io_channel ch)
{
	struct sio *p = ch->private_data;
	errcode_t err = 0;

	if (p->j && si_journal_flush(p->j) < 0)
		err = EXT2_ET_SHORT_WRITE;
	if (!err && p->power)
		err = overlay_flush(p);
	if (!err && p->dirty && !p->nocache) {
		err = io_channel_flush(p->real);
		p->dirty = err != 0;
	}
	if (!err && p->j && !p->dirty)
		si_journal_io_synced(p->j);
	return err;
}

static errcode_t sio_close(io_channel ch)
{
	struct sio *p = ch->private_data;
	errcode_t err;

	if (--ch->refcount > 0)
		return 0;
	err = sio_flush(ch);
	io_channel_close(p->real);
	free(p->slot);
	free(p);
	free(ch->name);
	free(ch);
	return err;
}

static errcode_t sio_set_blksize(io_channel ch, int blksize)
{
	struct sio *p = ch->private_data;
	errcode_t err;

	/* Writes queued or kept at the old size would no longer line up. */
	err = sio_flush(ch);
	if (!err)
		err = io_channel_set_blksize(p->real, blksize);
	ch->block_size = blksize;
	if (p->j)
		si_journal_io_attach(p->j, (unsigned int)blksize, issue, read_old, ch);
	return err;
}

/* What the blocks hold now: the image, and the writes still queued. */
static errcode_t read_now(io_channel ch, unsigned long long blk, int count,
			  void *data)
{
	struct sio *p = ch->private_data;
	size_t bsz = (size_t)ch->block_size;
	errcode_t err = lower_read(ch, blk, count, data);

	if (err || !p->j)
		return err;
	for (int i = 0; i < count; i++)
		si_journal_peek(p->j, blk + (unsigned int)i,
				(unsigned char *)data + (size_t)i * bsz);
	return 0;
}

static errcode_t sio_read64(io_channel ch, unsigned long long blk, int count,
			    void *data)
{
	size_t bsz = (size_t)ch->block_size;
	unsigned char *b;
	errcode_t err;

	if (count < 0) {
		/* A byte count: read whole blocks, hand back the part asked for. */
		size_t n = ((size_t)-count + bsz - 1) / bsz;

		b = malloc(n * bsz);
		if (!b)
			return EXT2_ET_NO_MEMORY;
		err = sio_read64(ch, blk, (int)n, b);
		if (!err)
			memcpy(data, b, (size_t)-count);
		free(b);
		return err;
	}
	return read_now(ch, blk, count, data);
}

static errcode_t sio_write64(io_channel ch, unsigned long long blk, int count,
			     const void *data)
{
	struct sio *p = ch->private_data;
	size_t bsz = (size_t)ch->block_size;
	unsigned char *old;
	errcode_t err = 0;
	int ret;

	if (count < 0) {
		/* A partial block: merge it into what the block holds now. */
		if ((size_t)-count > bsz)
			return EXT2_ET_UNIMPLEMENTED;
		old = malloc(bsz);
		if (!old)
			return EXT2_ET_NO_MEMORY;
		err = sio_read64(ch, blk, 1, old);
		if (!err) {
			memcpy(old, data, (size_t)-count);
			err = sio_write64(ch, blk, 1, old);
		}
		free(old);
		return err;
	}
	if (!p->j)
		return lower_write(ch, blk, count, data);
	/* The journal reads the old bytes, records the write and issues it. */
	ret = si_journal_io_block(p->j, blk, (unsigned int)count, data);
	if (ret < 0)
		err = ret > -4096 ? (errcode_t)-ret : EXT2_ET_SHORT_WRITE;
	return err;
}

static errcode_t sio_read(io_channel ch, unsigned long blk, int count, void *data)
{
	return sio_read64(ch, blk, count, data);
}

static errcode_t sio_write(io_channel ch, unsigned long blk, int count,
			   const void *data)
{
	return sio_write64(ch, blk, count, data);
}

static errcode_t sio_set_option(io_channel ch, const char *opt, const char *arg)
{
	struct sio *p = ch->private_data;

	return p->real->manager->set_option ?
	       p->real->manager->set_option(p->real, opt, arg) :
	       EXT2_ET_INVALID_ARGUMENT;
}

static struct struct_io_manager sio_manager = {
	.magic = EXT2_ET_MAGIC_IO_MANAGER,
	.name = "shiftimg journal I/O manager",
	.open = sio_open,
	.close = sio_close,
	.set_blksize = sio_set_blksize,
	.read_blk = sio_read,
	.write_blk = sio_write,
	.flush = sio_flush,
	.set_option = sio_set_option,
	.read_blk64 = sio_read64,
	.write_blk64 = sio_write64,
};

struct struct_io_manager *si_journal_io_manager(void)
{
	return si_journal_active() || si_fault_power() ? &sio_manager :
							 unix_io_manager;
}
