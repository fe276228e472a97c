// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A libext2fs io_manager that simulates power loss, for the fault
 * tests (SHIFTIMG_FAULT=KIND:N:power).  It sits on unix_io and keeps
 * every written block in memory until the next flush; reads see those
 * blocks.  When the fault fires the process dies with them, exactly as
 * a power cut loses writes still in a disk's cache: only what was
 * flushed reaches the image.  Without the switch the backend gets
 * unix_io itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include "journal.h"

#define SLOTS_MIN	1024

struct lost {
	unsigned long long blk;		/* ~0: empty */
	unsigned char *data;
};

struct power {
	io_channel real;
	struct lost *slot;		/* open addressing by block number */
	size_t cap, nr;
};

static struct struct_io_manager power_manager;

static size_t slot_of(const struct power *p, unsigned long long blk)
{
	size_t i = (size_t)(blk * 0x9e3779b97f4a7c15ull) & (p->cap - 1);

	while (p->slot[i].blk != ~0ull && p->slot[i].blk != blk)
		i = (i + 1) & (p->cap - 1);
	return i;
}

static void slots_init(struct struct_io_channel *ch)
{
	struct power *p = ch->private_data;

	for (size_t i = 0; i < p->cap; i++)
		p->slot[i] = (struct lost){ ~0ull, NULL };
}

static errcode_t grow(io_channel ch)
{
	struct power *p = ch->private_data;
	struct lost *old = p->slot;
	size_t cap = p->cap;

	p->cap = cap ? cap * 2 : SLOTS_MIN;
	p->slot = malloc(p->cap * sizeof(*p->slot));
	if (!p->slot) {
		p->slot = old;
		p->cap = cap;
		return EXT2_ET_NO_MEMORY;
	}
	slots_init(ch);
	for (size_t i = 0; i < cap; i++)
		if (old[i].blk != ~0ull)
			p->slot[slot_of(p, old[i].blk)] = old[i];
	free(old);
	return 0;
}

static void drop_all(struct power *p)
{
	for (size_t i = 0; i < p->cap; i++) {
		free(p->slot[i].data);
		p->slot[i] = (struct lost){ ~0ull, NULL };
	}
	p->nr = 0;
}

static errcode_t power_open(const char *name, int flags, io_channel *chp)
{
	io_channel ch = calloc(1, sizeof(*ch));
	struct power *p = calloc(1, sizeof(*p));
	errcode_t err;

	if (!ch || !p) {
		free(ch);
		free(p);
		return EXT2_ET_NO_MEMORY;
	}
	ch->private_data = p;
	err = unix_io_manager->open(name, flags, &p->real);
	if (!err)
		err = grow(ch);
	if (err) {
		if (p->real)
			io_channel_close(p->real);
		free(p->slot);
		free(p);
		free(ch);
		return err;
	}
	ch->magic = EXT2_ET_MAGIC_IO_CHANNEL;
	ch->manager = &power_manager;
	ch->name = strdup(name);
	ch->block_size = p->real->block_size;
	ch->refcount = 1;
	ch->flags = p->real->flags;
	*chp = ch;
	return 0;
}

static errcode_t power_flush(io_channel ch)
{
	struct power *p = ch->private_data;
	errcode_t err = 0;

	for (size_t i = 0; i < p->cap && !err; i++)
		if (p->slot[i].blk != ~0ull)
			err = io_channel_write_blk64(p->real, p->slot[i].blk, 1,
						     p->slot[i].data);
	if (!err)
		err = io_channel_flush(p->real);
	drop_all(p);
	return err;
}

static errcode_t power_close(io_channel ch)
{
	struct power *p = ch->private_data;
	errcode_t err;

	if (--ch->refcount > 0)
		return 0;
	err = power_flush(ch);
	io_channel_close(p->real);
	free(p->slot);
	free(p);
	free(ch->name);
	free(ch);
	return err;
}

static errcode_t power_set_blksize(io_channel ch, int blksize)
{
	struct power *p = ch->private_data;
	errcode_t err;

	/* Blocks kept at the old size would no longer line up. */
	err = power_flush(ch);
	if (!err)
		err = io_channel_set_blksize(p->real, blksize);
	ch->block_size = blksize;
	return err;
}

static errcode_t power_read64(io_channel ch, unsigned long long blk, int count,
			      void *data)
{
	struct power *p = ch->private_data;
	size_t bsz = (size_t)ch->block_size, n;
	errcode_t err = io_channel_read_blk64(p->real, blk, count, data);

	if (err)
		return err;
	n = count < 0 ? ((size_t)-count + bsz - 1) / bsz : (size_t)count;
	for (size_t i = 0; i < n; i++) {
		size_t s = slot_of(p, blk + i);

		if (p->slot[s].blk != ~0ull) {
			size_t len = count < 0 && i == n - 1 && (size_t)-count % bsz ?
				     (size_t)-count % bsz : bsz;

			memcpy((unsigned char *)data + i * bsz, p->slot[s].data, len);
		}
	}
	return 0;
}

static errcode_t power_write64(io_channel ch, unsigned long long blk, int count,
			       const void *data)
{
	struct power *p = ch->private_data;
	size_t bsz = (size_t)ch->block_size, n;
	errcode_t err;

	if (count < 0) {
		/* A partial block: merge it into what the block holds now. */
		if ((size_t)-count > bsz)
			return EXT2_ET_UNIMPLEMENTED;
		unsigned char *b = malloc(bsz);

		if (!b)
			return EXT2_ET_NO_MEMORY;
		err = power_read64(ch, blk, 1, b);
		if (!err) {
			memcpy(b, data, (size_t)-count);
			err = power_write64(ch, blk, 1, b);
		}
		free(b);
		return err;
	}
	n = (size_t)count;
	for (size_t i = 0; i < n; i++) {
		size_t s;

		if ((p->nr + 1) * 2 > p->cap && (err = grow(ch)))
			return err;
		s = slot_of(p, blk + i);
		if (p->slot[s].blk == ~0ull) {
			p->slot[s].data = malloc(bsz);
			if (!p->slot[s].data)
				return EXT2_ET_NO_MEMORY;
			p->slot[s].blk = blk + i;
			p->nr++;
		}
		memcpy(p->slot[s].data, (const unsigned char *)data + i * bsz, bsz);
	}
	return 0;
}

static errcode_t power_read(io_channel ch, unsigned long blk, int count, void *data)
{
	return power_read64(ch, blk, count, data);
}

static errcode_t power_write(io_channel ch, unsigned long blk, int count,
			     const void *data)
{
	return power_write64(ch, blk, count, data);
}

static errcode_t power_set_option(io_channel ch, const char *opt, const char *arg)
{
	struct power *p = ch->private_data;

	return p->real->manager->set_option ?
	       p->real->manager->set_option(p->real, opt, arg) :
	       EXT2_ET_INVALID_ARGUMENT;
}

static struct struct_io_manager power_manager = {
	.magic = EXT2_ET_MAGIC_IO_MANAGER,
	.name = "shiftimg power-loss I/O manager",
	.open = power_open,
	.close = power_close,
	.set_blksize = power_set_blksize,
	.read_blk = power_read,
	.write_blk = power_write,
	.flush = power_flush,
	.set_option = power_set_option,
	.read_blk64 = power_read64,
	.write_blk64 = power_write64,
};

struct struct_io_manager *si_journal_io_manager(void)
{
	return si_fault_power() ? &power_manager : unix_io_manager;
}
