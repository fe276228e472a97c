// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * gztap on hostile gzip streams, judged by zlib: what zlib reads (its
 * members in turn, zeros after the first allowed as gzip allows them) gztap
 * reads to the same bytes, and what zlib refuses gztap refuses.  What was
 * read is then written again by gzreuse, the first input byte choosing
 * pieces and alignment hints, and zlib must read that back as the same
 * bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gzreuse.h"

#define OUT_MAX		(8u << 20)

struct buf {
	unsigned char *p;
	size_t len, cap;
};

static int add(struct buf *b, const void *p, size_t len)
{
	if (!len)
		return 0;
	if (b->len + len > OUT_MAX)
		return -1;
	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->len, p, len);
	b->len += len;
	return 0;
}

/* zlib's reading: 0, -1 refused, -2 too large to judge. */
static int zlib_read(const uint8_t *in, size_t len, struct buf *out)
{
	unsigned char o[16384];
	size_t off = 0;

	if (!len)
		return -1;
	while (off < len) {
		z_stream z = { 0 };
		int ret;

		if (in[off] != 0x1f && off) {
			while (off < len && !in[off])
				off++;
			return off == len ? 0 : -1;
		}
		if (inflateInit2(&z, 31) != Z_OK)
			abort();
		z.next_in = (unsigned char *)in + off;
		z.avail_in = (uInt)(len - off);
		do {
			z.next_out = o;
			z.avail_out = sizeof(o);
			ret = inflate(&z, Z_NO_FLUSH);
			if ((ret == Z_OK || ret == Z_STREAM_END) &&
			    add(out, o, sizeof(o) - z.avail_out)) {
				inflateEnd(&z);
				return -2;
			}
		} while (ret == Z_OK);
		off = len - z.avail_in;
		inflateEnd(&z);
		if (ret != Z_STREAM_END)
			return -1;
	}
	return 0;
}

struct feed {
	const uint8_t *p;
	size_t len, off, step;
};

static ssize_t feed(void *arg, const unsigned char **p)
{
	struct feed *f = arg;
	size_t n = f->len - f->off < f->step ? f->len - f->off : f->step;

	*p = f->p + f->off;
	f->off += n;
	return (ssize_t)n;
}

static int to_buf(void *arg, const void *p, size_t len)
{
	return add(arg, p, len) ? -1 : 0;
}

static void rewrite(struct gz_matches *q, const struct buf *tar, unsigned int sel)
{
	struct buf out = { 0 }, back = { 0 };
	struct gzreuse *g = gzreuse_new(q, to_buf, &out);
	size_t step = 1 + (sel & 15) * 97, o;

	if (!g)
		abort();
	for (o = 0; o < tar->len; o += step) {
		size_t n = tar->len - o < step ? tar->len - o : step;
		/* Hints right, shifted, or missing: never trusted. */
		uint64_t src = sel & 16 ? GZ_SRC_NEW : o + (sel & 32 ? (o / 4096) % 7 : 0);

		if (gzreuse_write(g, tar->p + o, n, src, sel & 64))
			abort();
	}
	if (gzreuse_finish(g) || zlib_read(out.p, out.len, &back) ||
	    back.len != tar->len || (tar->len && memcmp(back.p, tar->p, tar->len)))
		abort();
	gzreuse_free(g);
	free(out.p);
	free(back.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf want = { 0 }, got = { 0 };
	struct gz_matches q = { 0 };
	struct feed f;
	struct gztap *g;
	const unsigned char *p;
	unsigned int sel;
	ssize_t n = 0;
	int theirs;

	if (size < 1)
		return 0;
	sel = data[0];
	f = (struct feed){ data + 1, size - 1, 0, 1 + (size_t)sel * 31 };
	theirs = zlib_read(data + 1, size - 1, &want);
	if (theirs == -2)
		goto out;
	g = gztap_new(feed, &f, &q);
	if (!g)
		abort();
	while (got.len <= OUT_MAX && (n = gztap_read(g, &p)) > 0)
		add(&got, p, (size_t)n);
	gztap_free(g);
	if ((theirs == 0) != (n == 0))
		abort();
	if (!theirs && (got.len != want.len || (want.len && memcmp(got.p, want.p, want.len))))
		abort();
	if (!theirs)
		rewrite(&q, &got, sel);
out:
	gz_matches_free(&q);
	free(want.p);
	free(got.p);
	return 0;
}
