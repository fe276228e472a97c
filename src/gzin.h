/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Streaming gzip input: every member inflated in turn, its CRC-32 and
 * size checked, trailing zeros accepted as gzip(1) accepts them, and
 * anything else after the last member refused.  Memory is constant:
 * the inflater's state and one output buffer.
 */
#ifndef SHIFTIMG_GZIN_H
#define SHIFTIMG_GZIN_H

#include <stdint.h>
#include <sys/types.h>

struct gzin;

/*
 * The next compressed bytes into *p: their count, 0 at the end of the
 * input, or a negative errno.  They stay valid until the next call.
 */
typedef ssize_t gzin_fill_fn(void *arg, const unsigned char **p);

/* NULL when out of memory. */
struct gzin *gzin_new(gzin_fill_fn *fill, void *arg);
/*
 * Inflated bytes into *p (valid until the next call): their count, 0 at
 * the end of the last member, or a negative errno with the reason in
 * gzin_error() (-EIO: the input is not a good gzip stream).
 */
ssize_t gzin_read(struct gzin *g, const unsigned char **p);
const char *gzin_error(const struct gzin *g);
/* Offset in the compressed input of the next byte to inflate. */
uint64_t gzin_offset(const struct gzin *g);
void gzin_free(struct gzin *g);

#endif /* SHIFTIMG_GZIN_H */
