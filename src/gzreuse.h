/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Gzip re-written with the input's own matches.  A shift changes a few
 * bytes in each tar header and none of the file data, so the matches
 * the original compressor found (most of its work) still hold almost
 * everywhere.  gztap inflates the input and records every match it
 * decodes; gzreuse takes the shifted tar, re-uses each recorded match
 * whose bytes it can check are still the same at the same place, emits
 * the rest as literals, and Huffman-codes the result.  The output is
 * about the input's size at a fraction of the CPU of compressing anew,
 * and depends only on the input's bytes and the shift.
 */
#ifndef SHIFTIMG_GZREUSE_H
#define SHIFTIMG_GZREUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gzin.h"

/* A decoded match: at uncompressed offset pos, len bytes from dist back. */
struct gz_match {
	uint64_t pos;
	uint16_t len, dist;
};

/*
 * The matches decoded but not yet passed by the writer, in order.  It
 * holds at most a bounded number; beyond that the oldest are dropped,
 * which costs compression, never correctness.
 */
struct gz_matches {
	struct gz_match *m;
	size_t cap, head, len;
};

/* RFC 1951: length and distance bases and extra bits, code-length order. */
extern const uint16_t gz_len_base[29], gz_dist_base[30];
extern const uint8_t gz_len_extra[29], gz_dist_extra[30], gz_cl_order[19];
/* The low len bits of code, reversed: Huffman codes go out last bit first. */
unsigned int gz_reverse(unsigned int code, unsigned int len);

/* ---- the reader (gztap.c), gzin's interface with a tap ---- */

struct gztap;

/* NULL when out of memory.  Every match decoded is appended to *q. */
struct gztap *gztap_new(gzin_fill_fn *fill, void *arg, struct gz_matches *q);
ssize_t gztap_read(struct gztap *g, const unsigned char **p);
const char *gztap_error(const struct gztap *g);
uint64_t gztap_offset(const struct gztap *g);
void gztap_free(struct gztap *g);

/* ---- the writer (gzreuse.c) ---- */

struct gzreuse;

/* Where written bytes come from: see gzreuse_write(). */
#define GZ_SRC_NEW	UINT64_MAX

typedef int gzreuse_write_fn(void *arg, const void *p, size_t len);

/* NULL when out of memory.  q is the reader's. */
struct gzreuse *gzreuse_new(struct gz_matches *q, gzreuse_write_fn *fn, void *arg);
/*
 * The next len bytes of the tar.  src is the reader's offset of p[0]
 * where the bytes were read (same: and are unchanged, as file data), or
 * GZ_SRC_NEW for bytes that have no place in the input: those keep the
 * previous alignment of output to input, which holds when a header
 * kept its length.  Where the bytes may have changed, matches are also
 * looked for anew.
 */
int gzreuse_write(struct gzreuse *g, const void *p, size_t len, uint64_t src,
		  bool same);
/* Codes what is left and writes the trailer. */
int gzreuse_finish(struct gzreuse *g);
void gzreuse_free(struct gzreuse *g);

void gz_matches_free(struct gz_matches *q);

#endif /* SHIFTIMG_GZREUSE_H */
