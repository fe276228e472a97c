// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Open addressing with linear probing.  Inode 0 never names a file, so
 * a zero key marks an empty slot.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "inoset.h"

void si_inoset_init(struct si_inoset *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
}

void si_inoset_free(struct si_inoset *s)
{
	free(s->slots);
	pthread_mutex_destroy(&s->lock);
}

static size_t slot_of(const struct si_inoset *s, uint64_t dev, uint64_t ino)
{
	uint64_t x = (ino ^ (dev << 40) ^ (dev >> 24)) * 0x9e3779b97f4a7c15ull;

	return (size_t)(x >> 17) & (s->cap - 1);
}

static void insert(struct si_inoset *s, uint64_t dev, uint64_t ino)
{
	size_t i = slot_of(s, dev, ino);

	while (s->slots[i].ino)
		i = (i + 1) & (s->cap - 1);
	s->slots[i] = (struct si_inokey){ dev, ino };
	s->nr++;
}

static int grow(struct si_inoset *s)
{
	struct si_inoset n = { .cap = s->cap ? s->cap * 2 : 1024 };
	size_t i;

	n.slots = calloc(n.cap, sizeof(*n.slots));
	if (!n.slots)
		return -ENOMEM;
	for (i = 0; i < s->cap; i++)
		if (s->slots[i].ino)
			insert(&n, s->slots[i].dev, s->slots[i].ino);
	free(s->slots);
	s->slots = n.slots;
	s->cap = n.cap;
	return 0;
}

static int add_locked(struct si_inoset *s, uint64_t dev, uint64_t ino)
{
	size_t i;

	if (ino == 0)
		ino = ~0ull;	/* keep the empty marker free */
	if ((s->nr + 1) * 2 > s->cap && grow(s) < 0)
		return -ENOMEM;
	for (i = slot_of(s, dev, ino); s->slots[i].ino;
	     i = (i + 1) & (s->cap - 1))
		if (s->slots[i].ino == ino && s->slots[i].dev == dev)
			return 0;
	s->slots[i] = (struct si_inokey){ dev, ino };
	s->nr++;
	return 1;
}

int si_inoset_add(struct si_inoset *s, uint64_t dev, uint64_t ino)
{
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = add_locked(s, dev, ino);
	pthread_mutex_unlock(&s->lock);
	return ret;
}
