// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * gztap and gzreuse against zlib: gztap inflates every kind of block
 * zlib makes (stored, fixed, dynamic, at every level and strategy, in
 * several members) to zlib's bytes, and refuses or agrees with zlib on
 * damaged streams; gzreuse's output, from the same bytes, from bytes
 * changed in place and from bytes moved by an insertion, is one gzip
 * member zlib inflates to exactly those bytes, about the input's size
 * when little changed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zlib.h>

#include "gzreuse.h"

struct buf {
	unsigned char *p;
	size_t len, cap;
};

static void buf_add(struct buf *b, const void *p, size_t len)
{
	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	memcpy(b->p + b->len, p, len);
	b->len += len;
}

/* A tar-like mix: text, runs, random bytes, and 512-byte "headers". */
static struct buf sample(size_t len, unsigned int seed)
{
	struct buf b = { 0 };
	unsigned char chunk[4096];

	srand(seed);
	while (b.len < len) {
		size_t n = 1 + (size_t)rand() % sizeof(chunk);
		int kind = rand() % 4;

		for (size_t i = 0; i < n; i++)
			chunk[i] = kind == 0 ? (unsigned char)"the quick brown fox "[i % 20] :
				   kind == 1 ? 0 : kind == 2 ? (unsigned char)rand() :
				   (unsigned char)('a' + rand() % 4);
		buf_add(&b, chunk, n);
	}
	b.len = len;
	return b;
}

static struct buf gz(const unsigned char *p, size_t len, int level, int strategy)
{
	struct buf b = { 0 };
	z_stream z = { 0 };
	unsigned char out[65536];
	int ret;

	assert_int_equal(deflateInit2(&z, level, Z_DEFLATED, 31, 8, strategy), Z_OK);
	z.next_in = (unsigned char *)p;
	z.avail_in = (uInt)len;
	do {
		z.next_out = out;
		z.avail_out = sizeof(out);
		ret = deflate(&z, Z_FINISH);
		buf_add(&b, out, sizeof(out) - z.avail_out);
	} while (ret == Z_OK);
	assert_int_equal(ret, Z_STREAM_END);
	deflateEnd(&z);
	return b;
}

/* zlib's reading of a gzip stream (members in turn): 0 or -1. */
static int gunzip(const struct buf *in, struct buf *out)
{
	z_stream z = { 0 };
	unsigned char o[65536];
	size_t off = 0;
	int ret = Z_OK;

	out->len = 0;
	while (off < in->len) {
		assert_int_equal(inflateInit2(&z, 31), Z_OK);
		z.next_in = in->p + off;
		z.avail_in = (uInt)(in->len - off);
		do {
			z.next_out = o;
			z.avail_out = sizeof(o);
			ret = inflate(&z, Z_NO_FLUSH);
			buf_add(out, o, sizeof(o) - z.avail_out);
		} while (ret == Z_OK);
		off = in->len - z.avail_in;
		inflateEnd(&z);
		if (ret != Z_STREAM_END)
			return -1;
	}
	return 0;
}

struct feed {
	const struct buf *in;
	size_t off, step;
};

static ssize_t feed(void *arg, const unsigned char **p)
{
	struct feed *f = arg;
	size_t n = f->in->len - f->off < f->step ? f->in->len - f->off : f->step;

	*p = f->in->p + f->off;
	f->off += n;
	return (ssize_t)n;
}

/* gztap's reading: 0 with the bytes, or the error. */
static int tap(const struct buf *in, size_t step, struct buf *out, struct gz_matches *q)
{
	struct feed f = { in, 0, step };
	struct gztap *g = gztap_new(feed, &f, q);
	const unsigned char *p;
	ssize_t n;

	assert_non_null(g);
	out->len = 0;
	while ((n = gztap_read(g, &p)) > 0)
		buf_add(out, p, (size_t)n);
	if (n < 0)
		assert_non_null(strstr(gztap_error(g), "gzip: "));
	gztap_free(g);
	return (int)n;
}

static int to_buf(void *arg, const void *p, size_t len)
{
	buf_add(arg, p, len);
	return 0;
}

/*
 * gzreuse of want, whose bytes are those of the input but for a
 * change at [at, at + old) made [at, at + new): written as the tar
 * backend writes, the changed bytes apart (as a header is) and the rest
 * in pieces of step bytes with their place in the input, said to be
 * the input's own bytes if same.
 */
static struct buf reuse(struct gz_matches *q, const struct buf *want, size_t at,
			size_t old, size_t new, size_t step, bool same)
{
	struct buf out = { 0 };
	struct gzreuse *g = gzreuse_new(q, to_buf, &out);
	size_t o = 0;

	assert_non_null(g);
	while (o < want->len) {
		size_t end = o < at ? at : o < at + new ? at + new : want->len;
		size_t n = end - o < step ? end - o : step;
		uint64_t src = o < at ? o : o >= at + new ? o - new + old : GZ_SRC_NEW;

		assert_int_equal(gzreuse_write(g, want->p + o, n, src, same), 0);
		o += n;
	}
	assert_int_equal(gzreuse_finish(g), 0);
	gzreuse_free(g);
	return out;
}

static void check_gunzips_to(const struct buf *z, const struct buf *want)
{
	struct buf got = { 0 };

	assert_int_equal(gunzip(z, &got), 0);
	assert_int_equal(got.len, want->len);
	assert_memory_equal(got.p, want->p, want->len);
	free(got.p);
}

static void test_every_block_kind(void **state)
{
	static const int strategies[] = { Z_DEFAULT_STRATEGY, Z_FIXED, Z_HUFFMAN_ONLY, Z_RLE, Z_FILTERED };
	struct buf s = sample(300000, 1), got = { 0 };

	(void)state;
	for (int level = 0; level <= 9; level++)
		for (size_t k = 0; k < sizeof(strategies) / sizeof(*strategies); k++) {
			struct gz_matches q = { 0 };
			struct buf z = gz(s.p, s.len, level, strategies[k]), r;

			assert_int_equal(tap(&z, 1 + (size_t)level * 997, &got, &q), 0);
			assert_int_equal(got.len, s.len);
			assert_memory_equal(got.p, s.p, s.len);
			/* Nothing changed: the matches all hold again. */
			gz_matches_free(&q);
			assert_int_equal(tap(&z, 65536, &got, &q), 0);
			r = reuse(&q, &s, 0, 0, 0, 70001, true);
			check_gunzips_to(&r, &s);
			if (level)
				assert_true(r.len < z.len + z.len / 100 + 64);
			gz_matches_free(&q);
			free(z.p);
			free(r.p);
		}
	free(got.p);
	free(s.p);
}

static void test_members_and_empty(void **state)
{
	struct buf s = sample(200000, 2), z = { 0 }, got = { 0 }, a, b, e;
	struct gz_matches q = { 0 };
	unsigned char zeros[300] = { 0 };

	(void)state;
	a = gz(s.p, 120000, 6, Z_DEFAULT_STRATEGY);
	b = gz(s.p + 120000, s.len - 120000, 1, Z_DEFAULT_STRATEGY);
	e = gz(NULL, 0, 6, Z_DEFAULT_STRATEGY);
	buf_add(&z, a.p, a.len);
	buf_add(&z, e.p, e.len);
	buf_add(&z, b.p, b.len);
	buf_add(&z, zeros, sizeof(zeros));
	assert_int_equal(tap(&z, 4093, &got, &q), 0);
	assert_int_equal(got.len, s.len);
	assert_memory_equal(got.p, s.p, s.len);
	/* The second member's matches never reach into the first. */
	for (size_t i = 0; i < q.len; i++) {
		struct gz_match *m = &q.m[(q.head + i) & (q.cap - 1)];

		assert_true(m->pos < 120000 || m->pos - m->dist >= 120000);
	}
	gz_matches_free(&q);
	/* Junk after the zeros, or after a member, is refused. */
	buf_add(&z, "x", 1);
	assert_int_equal(tap(&z, 4093, &got, &q), -EIO);
	gz_matches_free(&q);
	z.len = a.len + 1;
	z.p[a.len] = 'x';
	assert_int_equal(tap(&z, 4093, &got, &q), -EIO);
	gz_matches_free(&q);
	free(a.p);
	free(b.p);
	free(e.p);
	free(z.p);
	free(got.p);
	free(s.p);
}

/* Bytes changed in place, and bytes inserted: output right, size close. */
static void test_changes(void **state)
{
	struct buf s = sample(400000, 3), z = gz(s.p, s.len, 6, Z_DEFAULT_STRATEGY), got = { 0 };
	static const size_t ins[] = { 0, 1, 7, 512, 1536 };

	(void)state;
	for (size_t k = 0; k < sizeof(ins) / sizeof(*ins); k++) {
		struct gz_matches q = { 0 };
		struct buf want = { 0 }, r;
		size_t at = 123457;

		buf_add(&want, s.p, at);
		for (size_t i = 0; i < ins[k] + 20; i++)
			buf_add(&want, "#", 1);
		buf_add(&want, s.p + at + 20, s.len - at - 20);
		for (size_t i = 0; i < want.len; i += 9973)
			want.p[i] ^= 0x55;	/* and a byte in each stretch */
		assert_int_equal(tap(&z, 65536, &got, &q), 0);
		r = reuse(&q, &want, at, 20, ins[k] + 20, 1 + k * 4096, false);
		check_gunzips_to(&r, &want);
		assert_true(r.len < z.len + z.len / 50);
		gz_matches_free(&q);
		free(want.p);
		free(r.p);
	}
	free(got.p);
	free(z.p);
	free(s.p);
}

/* With the alignment wrong throughout, matches are checked, never trusted. */
static void test_wrong_alignment(void **state)
{
	struct buf s = sample(200000, 4), z = gz(s.p, s.len, 9, Z_DEFAULT_STRATEGY), got = { 0 }, r;
	struct buf rev = { 0 };
	struct gz_matches q = { 0 };
	struct gzreuse *g;

	(void)state;
	for (size_t i = s.len; i-- > 0;)
		buf_add(&rev, s.p + i, 1);
	assert_int_equal(tap(&z, 65536, &got, &q), 0);
	r = (struct buf){ 0 };
	g = gzreuse_new(&q, to_buf, &r);
	for (size_t o = 0; o < rev.len; o += 1000)
		assert_int_equal(gzreuse_write(g, rev.p + o, rev.len - o < 1000 ? rev.len - o : 1000,
					       (o * 7919) % s.len, true), 0);
	assert_int_equal(gzreuse_finish(g), 0);
	gzreuse_free(g);
	check_gunzips_to(&r, &rev);
	gz_matches_free(&q);
	free(r.p);
	free(rev.p);
	free(got.p);
	free(z.p);
	free(s.p);
}

/* Damaged streams: gztap refuses what zlib refuses, and agrees otherwise. */
static void test_damage(void **state)
{
	struct buf s = sample(30000, 5), got = { 0 }, ref = { 0 };
	int levels[] = { 0, 1, 6 };

	(void)state;
	srand(6);
	for (size_t l = 0; l < 3; l++) {
		struct buf z = gz(s.p, s.len, levels[l], l == 1 ? Z_FIXED : Z_DEFAULT_STRATEGY);

		for (int t = 0; t < 1500; t++) {
			struct gz_matches q = { 0 };
			struct buf d = { 0 };
			int ours, theirs;

			buf_add(&d, z.p, z.len);
			if (t < 300) {
				d.len = (size_t)t * z.len / 300;	/* truncated */
			} else {
				for (int k = 0; k <= t % 3; k++)
					d.p[10 + (size_t)rand() % (d.len - 10)] ^= (unsigned char)(1u << (rand() % 8));
			}
			ours = tap(&d, 1 + (size_t)t % 5000, &got, &q);
			theirs = d.len ? gunzip(&d, &ref) : -1;
			if (!d.len) {
				assert_int_equal(ours, -EIO);	/* not even a header */
			} else if (theirs == 0) {
				assert_int_equal(ours, 0);
				assert_int_equal(got.len, ref.len);
				assert_memory_equal(got.p, ref.p, ref.len);
			} else {
				assert_int_equal(ours, -EIO);
			}
			gz_matches_free(&q);
			free(d.p);
		}
		free(z.p);
	}
	free(got.p);
	free(ref.p);
	free(s.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_block_kind),
		cmocka_unit_test(test_members_and_empty),
		cmocka_unit_test(test_changes),
		cmocka_unit_test(test_wrong_alignment),
		cmocka_unit_test(test_damage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
