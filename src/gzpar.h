/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Parallel gzip compression: the input is cut into blocks deflated on
 * worker threads and joined in order into one gzip member (CRCs joined
 * with crc32_combine).  The output depends only on the input and the
 * level, never on the number of threads (level 1: and
 * perhaps on the processor's instruction set, see gzpar.c).
 */
#ifndef SHIFTIMG_GZPAR_H
#define SHIFTIMG_GZPAR_H

#include <stddef.h>

struct gzpar;

/* Receives the compressed stream, in order: 0 or a negative errno. */
typedef int gzpar_write_fn(void *arg, const void *p, size_t len);

/* level 1-9; threads >= 1.  NULL when out of memory or threads fail. */
struct gzpar *gzpar_new(int level, unsigned int threads, gzpar_write_fn *fn,
			void *arg);
int gzpar_write(struct gzpar *g, const void *p, size_t len);
/* Compresses what is left and writes the trailer. */
int gzpar_finish(struct gzpar *g);
void gzpar_free(struct gzpar *g);

#endif /* SHIFTIMG_GZPAR_H */
