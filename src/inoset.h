/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A thread-safe set of (device, inode) pairs: hard links shifted once. */
#ifndef SHIFTIMG_INOSET_H
#define SHIFTIMG_INOSET_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

struct si_inoset {
	pthread_mutex_t lock;
	struct si_inokey { uint64_t dev, ino; } *slots;
	size_t nr, cap;		/* cap is 0 or a power of two */
};

void si_inoset_init(struct si_inoset *s);
void si_inoset_free(struct si_inoset *s);
/* Adds a pair: 1 if it was new, 0 if already there, -ENOMEM. */
int si_inoset_add(struct si_inoset *s, uint64_t dev, uint64_t ino);

#endif /* SHIFTIMG_INOSET_H */
