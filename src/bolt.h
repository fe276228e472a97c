/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A bolt (bbolt) database file, as pure functions on buffers: the whole
 * tree of buckets read into memory, and written again as a new compact
 * file.  libpod keeps its records in one (libpod/bolt_state.db), and a
 * value that changes length cannot be changed in place.
 */
#ifndef SHIFTIMG_BOLT_H
#define SHIFTIMG_BOLT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct si_bolt_bucket;

/* A key and its value, or a key and a nested bucket (sub). */
struct si_bolt_item {
	const unsigned char *key;	/* into the file's buffer */
	uint32_t klen;
	unsigned char *val;		/* into the buffer, or owned */
	uint32_t vlen;
	bool owned;			/* val is malloc'ed: freed with the tree */
	struct si_bolt_bucket *sub;
};

struct si_bolt_bucket {
	uint64_t seq;			/* the bucket's sequence counter */
	struct si_bolt_item *items;	/* in key order, as in the file */
	size_t nr, cap;
};

struct si_bolt {
	uint32_t page_size, flags;
	uint64_t txid;
	struct si_bolt_bucket root;
};

/*
 * Reads the file in b (n bytes, kept alive while db is used) from its
 * newest valid meta page.  Returns 0, or -1 with the reason in why.
 */
int si_bolt_parse(const unsigned char *b, size_t n, struct si_bolt *db,
		  char *why, size_t size);
/*
 * Writes db as a new file: meta pages 0 and 1 (the next transaction),
 * an empty freelist, and the tree packed into full pages, a bucket
 * small enough kept inline as bolt does.  Returns 0, or -1 (memory).
 */
int si_bolt_render(const struct si_bolt *db, unsigned char **out, size_t *len);
/* Replaces an item's value by a copy of v. Returns 0 or -1 (memory). */
int si_bolt_set(struct si_bolt_item *it, const void *v, size_t len);
void si_bolt_free(struct si_bolt *db);

#endif /* SHIFTIMG_BOLT_H */
