// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Streaming gzip input that also records the matches it decodes, for
 * gzreuse.c.  No library inflater says what it decoded, so this is an
 * inflater of its own (RFC 1951, 1952), with gzin.c's rules: every
 * member's CRC-32 and size checked, trailing zeros accepted, anything
 * else after the last member refused, constant memory.
 *
 * Input is pulled from the fill callback whenever the bit buffer runs
 * low, so decoding only ever stops for output: between two codes, with
 * the state kept in g->st.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libdeflate.h>

#include "gzreuse.h"
#include "le.h"

#define WIN		(32u << 10)	/* deflate's window */
#define OUT_CHUNK	(256u << 10)	/* returned per read, at most about */
#define SLACK		(258u + 16u)	/* a longest match past the limit, and copy overrun */
#define MAX_MATCHES	(1u << 20)	/* 16 MiB of queue at most */

/*
 * A decoding table entry: the low 16 bits are the symbol, or for a
 * subtable link its offset; bits 16-23 the bits the code takes (0: no
 * such code), or for a link the width of the subtable's index.
 */
#define E_LINK		(1u << 24)
#define LL_ROOT		10
#define D_ROOT		8
#define CL_ROOT		7
#define SUB_MAX		(1u << 15)	/* all subtables of one table, at most */

enum state { S_MEMBER, S_BLOCK, S_STORED, S_HUFF, S_TRAILER, S_END };

struct gztap {
	gzin_fill_fn *fill;
	void *arg;
	struct gz_matches *q;
	const unsigned char *ip, *iend;
	uint64_t in_read;
	bool eof, zeros, last;
	uint64_t bits;
	unsigned int nbits;
	enum state st;
	uint32_t stored_left;
	/* The output: the window, then what this read made. */
	unsigned char *w;
	size_t wlen, wcrc;		/* filled; summed into crc */
	uint64_t wbase;			/* uncompressed offset of w[0] */
	uint64_t member_start;
	uint32_t crc, size;
	uint32_t hcrc;			/* of the gzip header read so far */
	uint32_t ll[(1u << LL_ROOT) + SUB_MAX], d[(1u << D_ROOT) + SUB_MAX];
	char msg[160];
};

/* RFC 1951's tables, for gzreuse.c too. */
const uint16_t gz_len_base[29] = {
	3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
	35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258 };
const uint8_t gz_len_extra[29] = {
	0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
	3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0 };
const uint16_t gz_dist_base[30] = {
	1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193,
	257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145,
	8193, 12289, 16385, 24577 };
const uint8_t gz_dist_extra[30] = {
	0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6,
	7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13 };
const uint8_t gz_cl_order[19] = {
	16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15 };

unsigned int gz_reverse(unsigned int code, unsigned int len)
{
	unsigned int r = 0;

	while (len--) {
		r = (r << 1) | (code & 1);
		code >>= 1;
	}
	return r;
}

uint64_t gztap_offset(const struct gztap *g)
{
	uint64_t held = (uint64_t)(g->iend - g->ip) + g->nbits / 8;

	return g->in_read > held ? g->in_read - held : 0;
}

static int bad(struct gztap *g, const char *why)
{
	snprintf(g->msg, sizeof(g->msg), "gzip: %s at compressed offset %" PRIu64,
		 why, gztap_offset(g));
	return -EIO;
}

const char *gztap_error(const struct gztap *g)
{
	return g->msg;
}

/* ---- bits ---- */

static int pull(struct gztap *g)
{
	const unsigned char *p;
	ssize_t n = g->fill(g->arg, &p);

	if (n < 0) {
		snprintf(g->msg, sizeof(g->msg), "%s", strerror((int)-n));
		return (int)n;
	}
	g->eof = n == 0;
	g->ip = p;
	g->iend = p + n;
	g->in_read += (uint64_t)n;
	return 0;
}

static int refill_slow(struct gztap *g)
{
	int err;

	while (g->nbits <= 56) {
		if (g->ip == g->iend) {
			if (g->eof)
				return 0;
			err = pull(g);
			if (err)
				return err;
			continue;
		}
		g->bits |= (uint64_t)*g->ip++ << g->nbits;
		g->nbits += 8;
	}
	return 0;
}

/* At least k (<= 56) bits in g->bits, or the stream ends too soon. */
static inline int need(struct gztap *g, unsigned int k)
{
	int err;

	if (g->nbits >= k)
		return 0;
	if (g->iend - g->ip >= 8) {
		g->bits |= get64(g->ip) << g->nbits;
		g->ip += (63 - g->nbits) >> 3;
		g->nbits |= 56;
		return 0;
	}
	err = refill_slow(g);
	if (err)
		return err;
	return g->nbits >= k ? 0 : bad(g, "unexpected end of stream");
}

static inline uint32_t take(struct gztap *g, unsigned int k)
{
	uint32_t v = (uint32_t)(g->bits & ((1ull << k) - 1));

	g->bits >>= k;
	g->nbits -= k;
	return v;
}

static int take_byte(struct gztap *g, uint32_t *v)
{
	int err = need(g, 8);

	if (!err)
		*v = take(g, 8);
	return err;
}

/* Is another byte there?  1 yes, 0 at the end, or a -errno. */
static int more(struct gztap *g)
{
	int err;

	if (g->nbits >= 8)
		return 1;
	err = refill_slow(g);
	return err ? err : g->nbits >= 8;
}

/* ---- Huffman tables ---- */

/*
 * Canonical codes of lens[0..n) into t.  Over-subscribed lengths are
 * refused, as are incomplete ones except, for the literal/length and
 * distance codes, a single code of one bit (a distance code used once);
 * no codes at all makes a table that refuses every code.  Codes longer
 * than root go to subtables after the root.
 */
static int build(uint32_t *t, unsigned int root, const uint8_t *lens, unsigned int n)
{
	unsigned int count[16] = { 0 }, next_code[16], code[320], i, len, max = 0;
	unsigned int mask = (1u << root) - 1, used = 1u << root;
	uint8_t width[1u << LL_ROOT] = { 0 };
	int left = 1;

	for (i = 0; i < n; i++)
		count[lens[i]]++;
	count[0] = 0;
	for (len = 1; len <= 15; len++) {
		left = left * 2 - (int)count[len];
		if (left < 0)
			return -1;
		if (count[len])
			max = len;
	}
	if (left > 0 && (max > 1 || root == CL_ROOT))
		return -1;
	next_code[1] = 0;
	for (len = 1; len < 15; len++)
		next_code[len + 1] = (next_code[len] + count[len]) << 1;
	memset(t, 0, sizeof(*t) << root);
	for (i = 0; i < n; i++) {
		if (!(len = lens[i]))
			continue;
		code[i] = gz_reverse(next_code[len]++, len);
		if (len <= root) {
			for (unsigned int j = code[i]; j <= mask; j += 1u << len)
				t[j] = i | len << 16;
		} else if (width[code[i] & mask] < len - root) {
			width[code[i] & mask] = (uint8_t)(len - root);
		}
	}
	for (i = 0; i <= mask; i++)
		if (width[i]) {
			t[i] = E_LINK | used | (uint32_t)width[i] << 16;
			memset(t + used, 0, sizeof(*t) << width[i]);
			used += 1u << width[i];
		}
	for (i = 0; i < n; i++) {
		uint32_t link;

		if ((len = lens[i]) <= root)
			continue;
		link = t[code[i] & mask];
		for (unsigned int j = code[i] >> root; j < 1u << width[code[i] & mask];
		     j += 1u << (len - root))
			t[(link & 0xffff) + j] = i | (len - root) << 16;
	}
	return 0;
}

/*
 * The entry of the code at the bottom of b (15 bits there), and in
 * *used the bits it takes; an entry with no length is no code.
 */
static inline uint32_t lookup(const uint32_t *t, unsigned int root, uint64_t b,
			      unsigned int *used)
{
	uint32_t e = t[b & ((1u << root) - 1)];

	*used = 0;
	if (e & E_LINK) {
		*used = root;
		e = t[(e & 0xffff) + ((b >> root) & ((1u << ((e >> 16) & 0xff)) - 1))];
	}
	*used += (e >> 16) & 0xff;
	return e;
}

/* The next code in g->bits (15 bits there): its symbol, or -1 for none. */
static inline int decode(struct gztap *g, const uint32_t *t, unsigned int root)
{
	unsigned int used;
	uint32_t e = lookup(t, root, g->bits, &used);

	if (!((e >> 16) & 0xff))
		return -1;
	take(g, used);
	return (int)(e & 0xffff);
}

static void fixed_tables(struct gztap *g)
{
	uint8_t lens[288];

	memset(lens, 8, 144);
	memset(lens + 144, 9, 112);
	memset(lens + 256, 7, 24);
	memset(lens + 280, 8, 8);
	build(g->ll, LL_ROOT, lens, 288);
	memset(lens, 5, 32);
	build(g->d, D_ROOT, lens, 32);
}

static int dynamic_tables(struct gztap *g)
{
	uint8_t cl[19] = { 0 }, lens[320];
	uint32_t cl_table[1u << CL_ROOT];
	unsigned int nlit, ndist, ncl, i = 0;
	int err = need(g, 14), sym;

	if (err)
		return err;
	nlit = take(g, 5) + 257;
	ndist = take(g, 5) + 1;
	ncl = take(g, 4) + 4;
	if (nlit > 286 || ndist > 30)
		return bad(g, "too many length or distance symbols");
	for (unsigned int k = 0; k < ncl; k++) {
		if ((err = need(g, 3)))
			return err;
		cl[gz_cl_order[k]] = (uint8_t)take(g, 3);
	}
	if (build(cl_table, CL_ROOT, cl, 19))
		return bad(g, "invalid code lengths set");
	while (i < nlit + ndist) {
		unsigned int rep, val = 0;

		if ((err = need(g, 14)))
			return err;
		if ((sym = decode(g, cl_table, CL_ROOT)) < 0)
			return bad(g, "invalid code lengths set");
		if (sym < 16) {
			lens[i++] = (uint8_t)sym;
			continue;
		}
		if (sym == 16) {
			if (!i)
				return bad(g, "invalid bit length repeat");
			val = lens[i - 1];
			rep = 3 + take(g, 2);
		} else {
			rep = sym == 17 ? 3 + take(g, 3) : 11 + take(g, 7);
		}
		if (i + rep > nlit + ndist)
			return bad(g, "invalid bit length repeat");
		memset(lens + i, (int)val, rep);
		i += rep;
	}
	if (!lens[256])
		return bad(g, "invalid code -- missing end-of-block");
	if (build(g->ll, LL_ROOT, lens, nlit))
		return bad(g, "invalid literal/lengths set");
	if (build(g->d, D_ROOT, lens + nlit, ndist))
		return bad(g, "invalid distances set");
	return 0;
}

/* ---- the queue ---- */

static int queue_grow(struct gz_matches *q)
{
	size_t cap = q->cap ? q->cap * 2 : 4096;
	struct gz_match *m = malloc(cap * sizeof(*m));
	size_t first;

	if (!m)
		return -ENOMEM;
	first = q->cap - q->head < q->len ? q->cap - q->head : q->len;
	if (q->len) {
		memcpy(m, q->m + q->head, first * sizeof(*m));
		memcpy(m + first, q->m, (q->len - first) * sizeof(*m));
	}
	free(q->m);
	q->m = m;
	q->cap = cap;
	q->head = 0;
	return 0;
}

static int record(struct gztap *g, uint64_t pos, unsigned int len, unsigned int dist)
{
	struct gz_matches *q = g->q;

	if (q->len == q->cap) {
		if (q->cap < MAX_MATCHES) {
			if (queue_grow(q))
				return bad(g, "out of memory");
		} else {
			/* The writer is far behind: it will do without these. */
			q->head = (q->head + 1) & (q->cap - 1);
			q->len--;
		}
	}
	q->m[(q->head + q->len) & (q->cap - 1)] = (struct gz_match){ pos, (uint16_t)len, (uint16_t)dist };
	q->len++;
	return 0;
}

/* ---- blocks ---- */

static inline void copy_match(unsigned char *d, unsigned int len, unsigned int dist)
{
	const unsigned char *s = d - dist;

	if (dist >= 8) {
		for (unsigned int k = 0; k < len; k += 8)
			memcpy(d + k, s + k, 8);
	} else {
		for (unsigned int k = 0; k < len; k++)
			d[k] = s[k];
	}
}

/*
 * huff()'s loop while 8 bytes of input are there: one refill gives 56
 * bits, enough for a whole token (15 + 5 + 15 + 13 = 48), and the state is
 * kept in locals, which stores to the window cannot alias.  Anything
 * unusual (the end of the block, a bad code, a distance too far) is
 * left, unconsumed, to huff(), which decides it.
 */
static int huff_fast(struct gztap *g, size_t lim)
{
	const unsigned char *ip = g->ip;
	uint64_t bits = g->bits, made = g->wbase - g->member_start;
	unsigned int nbits = g->nbits;
	unsigned char *w = g->w;
	size_t wlen = g->wlen;
	struct gz_matches *q = g->q;
	int err = 0;

	while (wlen < lim && g->iend - ip >= 8) {
		uint64_t b;
		uint32_t e;
		unsigned int used, k, sym, len, dist;

		if (nbits < 48) {
			/* refill_slow() may leave 64 */
			bits |= get64(ip) << nbits;
			ip += (63 - nbits) >> 3;
			nbits |= 56;
		}
		e = lookup(g->ll, LL_ROOT, bits, &used);
		sym = e & 0xffff;
		if (!((e >> 16) & 0xff) || sym == 256 || sym >= 286)
			break;
		b = bits >> used;
		if (sym < 256) {
			w[wlen++] = (unsigned char)sym;
			bits = b;
			nbits -= used;
			continue;
		}
		sym -= 257;
		k = gz_len_extra[sym];
		len = gz_len_base[sym] + (unsigned int)(b & ((1u << k) - 1));
		b >>= k;
		used += k;
		e = lookup(g->d, D_ROOT, b, &k);
		sym = e & 0xffff;
		if (!((e >> 16) & 0xff) || sym >= 30)
			break;
		b >>= k;
		used += k;
		k = gz_dist_extra[sym];
		dist = gz_dist_base[sym] + (unsigned int)(b & ((1u << k) - 1));
		if (dist > made + wlen)
			break;
		copy_match(w + wlen, len, dist);
		if (q->len < q->cap) {
			q->m[(q->head + q->len++) & (q->cap - 1)] =
				(struct gz_match){ g->wbase + wlen, (uint16_t)len, (uint16_t)dist };
		} else if ((err = record(g, g->wbase + wlen, len, dist))) {
			break;
		}
		wlen += len;
		bits = b >> k;
		nbits -= used + k;
	}
	g->ip = ip;
	g->bits = bits;
	g->nbits = nbits;
	g->wlen = wlen;
	return err;
}

static int huff(struct gztap *g, size_t lim)
{
	uint64_t made;
	unsigned int len, dist;
	int sym, err;

	while (g->wlen < lim) {
		if ((err = huff_fast(g, lim)))
			return err;
		if (g->wlen >= lim)
			break;
		/* One token the careful way: near the input's end, or odd. */
		if ((err = need(g, 15)))
			return err;
		sym = decode(g, g->ll, LL_ROOT);
		if (sym < 0)
			return bad(g, "invalid code");
		if (sym < 256) {
			g->w[g->wlen++] = (unsigned char)sym;
			continue;
		}
		if (sym == 256) {
			g->st = g->last ? S_TRAILER : S_BLOCK;
			return 0;
		}
		if ((sym -= 257) >= 29)
			return bad(g, "invalid literal/length code");
		if ((err = need(g, 5)))
			return err;
		len = gz_len_base[sym] + take(g, gz_len_extra[sym]);
		if ((err = need(g, 15)))
			return err;
		sym = decode(g, g->d, D_ROOT);
		if (sym < 0 || sym >= 30)
			return bad(g, "invalid distance code");
		if ((err = need(g, 13)))
			return err;
		dist = gz_dist_base[sym] + take(g, gz_dist_extra[sym]);
		made = g->wbase + g->wlen - g->member_start;
		if (dist > made)
			return bad(g, "invalid distance too far back");
		copy_match(g->w + g->wlen, len, dist);
		if ((err = record(g, g->wbase + g->wlen, len, dist)))
			return err;
		g->wlen += len;
	}
	return 0;
}

static int stored(struct gztap *g, size_t lim)
{
	int err;

	while (g->stored_left && g->wlen < lim) {
		size_t k;

		if (g->nbits >= 8) {
			g->w[g->wlen++] = (unsigned char)take(g, 8);
			g->stored_left--;
			continue;
		}
		/* Bits a fast refill loaded past nbits are of bytes skipped now. */
		g->bits = 0;
		if (g->ip == g->iend) {
			if (g->eof)
				return bad(g, "unexpected end of stream");
			if ((err = pull(g)))
				return err;
			continue;
		}
		k = (size_t)(g->iend - g->ip);
		if (k > g->stored_left)
			k = g->stored_left;
		if (k > lim - g->wlen)
			k = lim - g->wlen;
		memcpy(g->w + g->wlen, g->ip, k);
		g->ip += k;
		g->wlen += k;
		g->stored_left -= (uint32_t)k;
	}
	if (!g->stored_left)
		g->st = g->last ? S_TRAILER : S_BLOCK;
	return 0;
}

static int block_header(struct gztap *g)
{
	uint32_t type, len;
	int err = need(g, 3);

	if (err)
		return err;
	g->last = take(g, 1);
	type = take(g, 2);
	switch (type) {
	case 0:
		take(g, g->nbits & 7);
		if ((err = need(g, 32)))
			return err;
		len = take(g, 16);
		if (len != (~take(g, 16) & 0xffff))
			return bad(g, "invalid stored block lengths");
		g->stored_left = len;
		g->st = S_STORED;
		return 0;
	case 1:
		fixed_tables(g);
		break;
	case 2:
		err = dynamic_tables(g);
		break;
	default:
		return bad(g, "invalid block type");
	}
	if (!err)
		g->st = S_HUFF;
	return err;
}

/* ---- members ---- */

/* A byte of the gzip header, summed for its FHCRC. */
static int header_byte(struct gztap *g, uint32_t *v)
{
	unsigned char b;
	int err = take_byte(g, v);

	b = (unsigned char)*v;
	if (!err)
		g->hcrc = libdeflate_crc32(g->hcrc, &b, 1);
	return err;
}

static int skip_bytes(struct gztap *g, uint32_t n, bool to_nul)
{
	uint32_t v;
	int err;

	while (to_nul || n--) {
		if ((err = header_byte(g, &v)))
			return err;
		if (to_nul && !v)
			break;
	}
	return 0;
}

static int member_header(struct gztap *g)
{
	unsigned char h[10];
	uint32_t v, xlen, sum;
	int err = 0;

	g->hcrc = 0;
	for (int i = 0; i < 10 && !err; i++)
		if (!(err = header_byte(g, &v)))
			h[i] = (unsigned char)v;
	if (err)
		return err;
	if (h[0] != 0x1f || h[1] != 0x8b)
		return bad(g, "not a gzip header");
	if (h[2] != 8)
		return bad(g, "unknown compression method");
	if (h[3] & 0xe0)
		return bad(g, "unknown header flags set");
	if (h[3] & 4) {
		err = header_byte(g, &v) ?: header_byte(g, &xlen);
		err = err ?: skip_bytes(g, v | xlen << 8, false);
	}
	if (!err && (h[3] & 8))
		err = skip_bytes(g, 0, true);
	if (!err && (h[3] & 16))
		err = skip_bytes(g, 0, true);
	if (!err && (h[3] & 2)) {
		sum = g->hcrc & 0xffff;
		err = take_byte(g, &v) ?: take_byte(g, &xlen);
		if (!err && (v | xlen << 8) != sum)
			return bad(g, "header crc mismatch");
	}
	if (err)
		return err;
	g->member_start = g->wbase + g->wlen;
	g->crc = 0;
	g->size = 0;
	g->st = S_BLOCK;
	return 0;
}

static void account(struct gztap *g)
{
	g->crc = libdeflate_crc32(g->crc, g->w + g->wcrc, g->wlen - g->wcrc);
	g->size += (uint32_t)(g->wlen - g->wcrc);
	g->wcrc = g->wlen;
}

static int trailer(struct gztap *g)
{
	uint32_t crc, size;
	int err;

	take(g, g->nbits & 7);
	if ((err = need(g, 32)))
		return err;
	crc = take(g, 32);
	if ((err = need(g, 32)))
		return err;
	size = take(g, 32);
	account(g);
	if (crc != g->crc || size != g->size)
		return bad(g, "incorrect data check (CRC-32 or length)");
	g->st = S_MEMBER;
	return 0;
}

/*
 * Between two members: another member, or zeros to the end; anything
 * else is refused rather than dropped silently.
 */
static int next_member(struct gztap *g)
{
	int yes;

	for (;;) {
		if ((yes = more(g)) <= 0) {
			if (!yes)
				g->st = S_END;
			return yes;
		}
		if (!g->zeros && (g->bits & 0xff) == 0x1f)
			return member_header(g);
		if (g->bits & 0xff)
			return bad(g, g->zeros ? "data after the trailing zeros" :
				   "data that is not gzip");
		take(g, 8);
		g->zeros = true;
	}
}

static int step(struct gztap *g, size_t lim)
{
	switch (g->st) {
	case S_MEMBER:
		return g->wbase + g->wlen == 0 && !g->in_read ? member_header(g) : next_member(g);
	case S_BLOCK:
		return block_header(g);
	case S_STORED:
		return stored(g, lim);
	case S_HUFF:
		return huff(g, lim);
	case S_TRAILER:
		return trailer(g);
	case S_END:
		break;
	}
	return 0;
}

/* Keeps the last window of output before the next is made. */
static void slide(struct gztap *g)
{
	size_t drop;

	if (g->wlen <= WIN)
		return;
	drop = g->wlen - WIN;
	memmove(g->w, g->w + drop, WIN);
	g->wbase += drop;
	g->wlen = WIN;
	g->wcrc -= drop;
}

ssize_t gztap_read(struct gztap *g, const unsigned char **p)
{
	size_t lim = WIN + OUT_CHUNK, start;
	int err;

	slide(g);
	start = g->wlen;
	while (g->wlen < lim && g->st != S_END)
		if ((err = step(g, lim)))
			return err;
	if (g->wlen == start)
		return 0;
	account(g);
	*p = g->w + start;
	return (ssize_t)(g->wlen - start);
}

struct gztap *gztap_new(gzin_fill_fn *fill, void *arg, struct gz_matches *q)
{
	struct gztap *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->w = malloc(WIN + OUT_CHUNK + SLACK);
	if (!g->w) {
		free(g);
		return NULL;
	}
	g->fill = fill;
	g->arg = arg;
	g->q = q;
	return g;
}

void gztap_free(struct gztap *g)
{
	if (!g)
		return;
	free(g->w);
	free(g);
}

void gz_matches_free(struct gz_matches *q)
{
	free(q->m);
	memset(q, 0, sizeof(*q));
}
