// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Gzip output made of the input's own matches (see gzreuse.h).
 *
 * Each output byte o has a place in the input, o + delta: delta is set
 * by every write of copied input (file data) and kept across headers.
 * At o, the recorded match covering o + delta is tried: what is left of
 * it from there, at the same distance, is taken as far as the output
 * bytes really repeat, which is checked on the bytes themselves.  So a
 * match is never wrong, whatever the alignment; a wrong alignment only
 * costs literals.  A shifted header keeps its matches around the few
 * bytes that changed; file data keeps all of them.
 *
 * Tokens go out in blocks of BLOCK_TOKENS, each with its own Huffman
 * codes (or the fixed ones when those are shorter), as zlib blocks do.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <libdeflate.h>

#include "gzreuse.h"
#include "le.h"

#define HIST		(32u << 10)	/* deflate's window, kept behind the next byte */
#define TAKE		(256u << 10)	/* bytes taken in before they are coded */
#define MAX_LEN		258u
#define BLOCK_TOKENS	(1u << 14)
#define OUT_SIZE	(64u << 10)
#define SEGS		64
#define TOK_MATCH	(1u << 31)
#define HASH_BITS	14
/*
 * Where the input has literals a match found anew must be this long:
 * the input's compressor found the shorter ones not worth their bits.
 */
#define GAP_MIN		8

struct seg {
	uint64_t at;			/* from this output offset on */
	int64_t delta;			/* input offset - output offset */
	bool fresh;			/* bytes new or changed (not "same") */
};

/*
 * Bits waiting to go out (at most 7 between writes: whole bytes go out
 * at once) and the bytes of out[] filled.
 */
struct bits {
	uint64_t v;
	unsigned int n;
	size_t olen;
};

struct block_codes {
	uint8_t llen[288], dlen[30], cllen[19];
	uint16_t lcode[288], dcode[30], clcode[19];
	uint8_t cl[320], clx[320];	/* code-length symbols and their extra bits */
	unsigned int ncl_sym, nlit, ndist, ncl;
};

struct gzreuse {
	struct gz_matches *q;
	gzreuse_write_fn *fn;
	void *arg;
	unsigned char *h;		/* HIST + TAKE bytes of output */
	size_t hlen, cur;		/* filled; next to code */
	uint64_t hbase;			/* output offset of h[0] */
	struct seg seg[SEGS];		/* alignments still to come */
	unsigned int nseg;
	/* The alignments of the last window, the one at cur last. */
	struct seg past[SEGS];
	unsigned int npast;
	bool fresh;			/* the bytes at cur may differ from the input's */
	uint32_t *tok;
	unsigned int ntok;
	/* Output offset + 1 of the last literal with each 4-byte hash. */
	uint64_t hash[1u << HASH_BITS];
	uint32_t lfreq[286], dfreq[30];
	struct block_codes dyn, fix;	/* this block's codes; the fixed ones */
	uint8_t len_sym[MAX_LEN + 1], dist_lo[512], dist_hi[256];
	struct bits bw;
	unsigned char out[OUT_SIZE];
	uint32_t crc;
	uint64_t total;
	bool started;
	int err;
};

static void symbol_tables(struct gzreuse *g)
{
	unsigned int s, v;

	for (s = 0; s < 29; s++)
		for (v = gz_len_base[s]; v < gz_len_base[s] + (1u << gz_len_extra[s]) && v <= MAX_LEN; v++)
			g->len_sym[v] = (uint8_t)s;
	g->len_sym[MAX_LEN] = 28;
	for (s = 0; s < 30; s++)
		for (v = gz_dist_base[s]; v < gz_dist_base[s] + (1u << gz_dist_extra[s]); v++) {
			if (v <= 512)
				g->dist_lo[v - 1] = (uint8_t)s;
			else
				g->dist_hi[(v - 1) >> 7] = (uint8_t)s;
		}
}

static unsigned int dist_sym(const struct gzreuse *g, unsigned int dist)
{
	return dist <= 512 ? g->dist_lo[dist - 1] : g->dist_hi[(dist - 1) >> 7];
}

/* ---- bits out ---- */

static void out_flush(struct gzreuse *g)
{
	int err;

	if (g->bw.olen && !g->err && (err = g->fn(g->arg, g->out, g->bw.olen)))
		g->err = err;
	g->bw.olen = 0;
}

/*
 * n <= 57 bits at b->olen in out, which has 8 bytes of room there; the
 * whole bytes go out 8 at a time.
 */
static inline void add_bits(unsigned char *out, struct bits *b, uint64_t v, unsigned int n)
{
	b->v |= v << b->n;
	b->n += n;
	put64(out + b->olen, b->v);
	b->olen += b->n >> 3;
	b->v >>= b->n & ~7u;
	b->n &= 7;
}

static void put(struct gzreuse *g, uint32_t v, unsigned int n)
{
	add_bits(g->out, &g->bw, v, n);
	if (g->bw.olen > OUT_SIZE - 8)
		out_flush(g);
}

static void put_align(struct gzreuse *g)
{
	if (g->bw.n)
		g->out[g->bw.olen++] = (unsigned char)g->bw.v;
	g->bw.v = 0;
	g->bw.n = 0;
}

static void put_bytes(struct gzreuse *g, const unsigned char *p, size_t n)
{
	if (g->bw.olen + n > OUT_SIZE)
		out_flush(g);
	memcpy(g->out + g->bw.olen, p, n);
	g->bw.olen += n;
}

/* ---- Huffman codes ---- */

/*
 * Keys freq << 16 | symbol, given in symbol order, sorted: a radix sort
 * on the two bytes of freq (below 2^16: a block has fewer tokens), which
 * is stable and so leaves equal frequencies in symbol order.
 */
static void sort_keys(uint64_t *key, unsigned int n)
{
	uint64_t tmp[320];

	_Static_assert(BLOCK_TOKENS + 1 < 1u << 16, "frequencies fit in two bytes");
	for (unsigned int shift = 16; shift < 32; shift += 8) {
		unsigned int at[257] = { 0 }, i;

		for (i = 0; i < n; i++)
			at[((key[i] >> shift) & 0xff) + 1]++;
		for (i = 1; i < 257; i++)
			at[i] += at[i - 1];
		for (i = 0; i < n; i++)
			tmp[at[(key[i] >> shift) & 0xff]++] = key[i];
		memcpy(key, tmp, n * sizeof(*key));
	}
}

/*
 * Code lengths of at most limit bits for freq[0..n): a Huffman tree
 * (two queues over the symbols sorted by frequency), then, if it is too
 * deep, the lengths evened out as JPEG's Annex K.3 does, and given to
 * the symbols again most frequent first.  At least two codes, so every
 * set is complete.
 */
static void lengths(const uint32_t *freq, unsigned int n, unsigned int limit, uint8_t *len)
{
	uint64_t key[320];
	uint32_t w[640];
	unsigned int parent[640], depth[640], count[640] = { 0 };
	unsigned int nz = 0, i, leaf = 0, inner, next, l, fill = 2;

	memset(len, 0, n);
	for (i = 0; i < n && fill; i++)
		if (freq[i])
			fill--;
	/* Fewer than two used: the first unused ones count once. */
	for (i = 0; i < n; i++) {
		uint32_t f = freq[i];

		if (!f && fill) {
			f = 1;
			fill--;
		}
		if (f)
			key[nz++] = (uint64_t)f << 16 | i;
	}
	sort_keys(key, nz);
	for (i = 0; i < nz; i++)
		w[i] = (uint32_t)(key[i] >> 16);
	inner = next = nz;
	while (next < 2 * nz - 1) {
		unsigned int pick[2];

		for (int k = 0; k < 2; k++)
			pick[k] = leaf < nz && (inner == next || w[leaf] <= w[inner]) ?
				  leaf++ : inner++;
		w[next] = w[pick[0]] + w[pick[1]];
		parent[pick[0]] = parent[pick[1]] = next++;
	}
	depth[next - 1] = 0;
	for (i = next - 1; i-- > 0;)
		depth[i] = depth[parent[i]] + 1;
	for (i = 0; i < nz; i++)
		count[depth[i]]++;
	for (i = nz; i > limit; i--)
		while (count[i]) {
			unsigned int j = i - 2;

			while (!count[j])
				j--;
			count[i] -= 2;
			count[i - 1]++;
			count[j + 1] += 2;
			count[j]--;
		}
	/* The rarest symbols come first in key[]: the longest codes. */
	for (i = 0, l = limit; l > 0; l--)
		for (unsigned int c = count[l]; c; c--)
			len[key[i++] & 0xffff] = (uint8_t)l;
}

static void codes(const uint8_t *len, unsigned int n, uint16_t *code)
{
	unsigned int count[16] = { 0 }, next[16], i;

	for (i = 0; i < n; i++)
		count[len[i]]++;
	count[0] = 0;
	next[1] = 0;
	for (i = 1; i < 15; i++)
		next[i + 1] = (next[i] + count[i]) << 1;
	for (i = 0; i < n; i++)
		code[i] = len[i] ? (uint16_t)gz_reverse(next[len[i]]++, len[i]) : 0;
}

/* ---- blocks ---- */

/* The code lengths of the litlen and distance codes, run-length coded. */
static void code_lengths(struct block_codes *b)
{
	uint8_t all[316];
	unsigned int n = b->nlit + b->ndist, i = 0;

	memcpy(all, b->llen, b->nlit);
	memcpy(all + b->nlit, b->dlen, b->ndist);
	b->ncl_sym = 0;
	while (i < n) {
		unsigned int v = all[i], run = 1;

		while (i + run < n && all[i + run] == v)
			run++;
		i += run;
		if (!v) {
			for (; run >= 11; run -= run < 138 ? run : 138) {
				b->cl[b->ncl_sym] = 18;
				b->clx[b->ncl_sym++] = (uint8_t)((run < 138 ? run : 138) - 11);
			}
			if (run >= 3) {
				b->cl[b->ncl_sym] = 17;
				b->clx[b->ncl_sym++] = (uint8_t)(run - 3);
				run = 0;
			}
		} else {
			b->clx[b->ncl_sym] = 0;
			b->cl[b->ncl_sym++] = (uint8_t)v;
			for (run--; run >= 3; run -= run < 6 ? run : 6) {
				b->cl[b->ncl_sym] = 16;
				b->clx[b->ncl_sym++] = (uint8_t)((run < 6 ? run : 6) - 3);
			}
		}
		while (run--) {
			b->clx[b->ncl_sym] = 0;
			b->cl[b->ncl_sym++] = (uint8_t)v;
		}
	}
}

static const uint8_t cl_extra[19] = { [16] = 2, [17] = 3, [18] = 7 };

/* Bits of the tokens under the codes llen/dlen, the end code included. */
static uint64_t token_bits(const struct gzreuse *g, const uint8_t *llen, const uint8_t *dlen)
{
	uint64_t n = llen[256];
	unsigned int s;

	for (s = 0; s < 256; s++)
		n += (uint64_t)g->lfreq[s] * llen[s];
	for (s = 0; s < 29; s++)
		n += (uint64_t)g->lfreq[257 + s] * (llen[257 + s] + gz_len_extra[s]);
	for (s = 0; s < 30; s++)
		n += (uint64_t)g->dfreq[s] * (dlen[s] + gz_dist_extra[s]);
	return n;
}

static uint64_t dynamic_codes(struct gzreuse *g, struct block_codes *b)
{
	uint32_t clfreq[19] = { 0 };
	uint64_t n;
	unsigned int i;

	lengths(g->lfreq, 286, 15, b->llen);
	lengths(g->dfreq, 30, 15, b->dlen);
	for (b->nlit = 286; b->nlit > 257 && !b->llen[b->nlit - 1]; b->nlit--)
		;
	for (b->ndist = 30; b->ndist > 1 && !b->dlen[b->ndist - 1]; b->ndist--)
		;
	code_lengths(b);
	for (i = 0; i < b->ncl_sym; i++)
		clfreq[b->cl[i]]++;
	lengths(clfreq, 19, 7, b->cllen);
	for (b->ncl = 19; b->ncl > 4 && !b->cllen[gz_cl_order[b->ncl - 1]]; b->ncl--)
		;
	n = 5 + 5 + 4 + 3 * b->ncl;
	for (i = 0; i < b->ncl_sym; i++)
		n += b->cllen[b->cl[i]] + cl_extra[b->cl[i]];
	codes(b->llen, 286, b->lcode);
	codes(b->dlen, 30, b->dcode);
	codes(b->cllen, 19, b->clcode);
	return n + token_bits(g, b->llen, b->dlen);
}

static void fixed_codes(struct block_codes *b)
{
	memset(b->llen, 8, 144);
	memset(b->llen + 144, 9, 112);
	memset(b->llen + 256, 7, 24);
	memset(b->llen + 280, 8, 8);
	memset(b->dlen, 5, 30);
	codes(b->llen, 288, b->lcode);
	for (unsigned int i = 0; i < 30; i++)
		b->dcode[i] = (uint16_t)gz_reverse(i, 5);
}

/*
 * The block's tokens and its end code.  The bits are kept in a local,
 * which the stores to out cannot alias; a token is one add_bits() of at
 * most 15 + 5 + 15 + 13 bits.
 */
static void put_tokens(struct gzreuse *g, const struct block_codes *b)
{
	struct bits w = g->bw;

	for (unsigned int i = 0; i < g->ntok; i++) {
		uint32_t t = g->tok[i];
		unsigned int len, dist, s, d, n;
		uint64_t v;

		if (w.olen > OUT_SIZE - 8) {
			g->bw = w;
			out_flush(g);
			w.olen = 0;
		}
		if (!(t & TOK_MATCH)) {
			add_bits(g->out, &w, b->lcode[t], b->llen[t]);
			continue;
		}
		len = (t >> 16) & 0x1ff;
		dist = t & 0xffff;
		s = g->len_sym[len];
		d = dist_sym(g, dist);
		v = b->lcode[257 + s] | (len - gz_len_base[s]) << b->llen[257 + s];
		n = b->llen[257 + s] + gz_len_extra[s];
		v |= (uint64_t)(b->dcode[d] | (dist - gz_dist_base[d]) << b->dlen[d]) << n;
		n += b->dlen[d] + gz_dist_extra[d];
		add_bits(g->out, &w, v, n);
	}
	g->bw = w;
	put(g, b->lcode[256], b->llen[256]);
}

static int flush_block(struct gzreuse *g, bool last)
{
	struct block_codes *dyn = &g->dyn, *fix = &g->fix;
	uint64_t dbits;
	unsigned int i;

	g->lfreq[256] = 1;
	dbits = dynamic_codes(g, dyn);
	put(g, last, 1);
	if (token_bits(g, fix->llen, fix->dlen) <= dbits) {
		put(g, 1, 2);
		put_tokens(g, fix);
	} else {
		put(g, 2, 2);
		put(g, dyn->nlit - 257, 5);
		put(g, dyn->ndist - 1, 5);
		put(g, dyn->ncl - 4, 4);
		for (i = 0; i < dyn->ncl; i++)
			put(g, dyn->cllen[gz_cl_order[i]], 3);
		for (i = 0; i < dyn->ncl_sym; i++) {
			put(g, dyn->clcode[dyn->cl[i]], dyn->cllen[dyn->cl[i]]);
			put(g, dyn->clx[i], cl_extra[dyn->cl[i]]);
		}
		put_tokens(g, dyn);
	}
	g->ntok = 0;
	memset(g->lfreq, 0, sizeof(g->lfreq));
	memset(g->dfreq, 0, sizeof(g->dfreq));
	return g->err;
}

/* ---- choosing the tokens ---- */

static inline int emit(struct gzreuse *g, uint32_t t)
{
	if (t & TOK_MATCH) {
		g->lfreq[257 + g->len_sym[(t >> 16) & 0x1ff]]++;
		g->dfreq[dist_sym(g, t & 0xffff)]++;
	} else {
		g->lfreq[t]++;
	}
	g->tok[g->ntok++] = t;
	return g->ntok == BLOCK_TOKENS ? flush_block(g, false) : 0;
}

/*
 * How far a and b agree, up to max bytes.  Reads 8 bytes at a time, up
 * to 7 past max: h has that much room after its end.
 */
static inline size_t agree(const unsigned char *a, const unsigned char *b, size_t max)
{
	size_t n = 0;

	for (;;) {
		uint64_t x = get64(a + n) ^ get64(b + n);

		if (x) {
			n += (size_t)(__builtin_ctzll(x) >> 3);
			return n < max ? n : max;
		}
		n += 8;
		if (n >= max)
			return max;
	}
}

/*
 * The recorded match at input offset i: what is left of it from i (its
 * distance in *dist), or, with *dist 0, how many bytes from i no match
 * covers (UINT64_MAX: none recorded yet).
 */
static uint64_t recorded(struct gzreuse *g, uint64_t i, unsigned int *dist)
{
	struct gz_matches *q = g->q;
	struct gz_match *m = NULL;

	while (q->len) {
		m = &q->m[q->head];
		if (m->pos + m->len > i)
			break;
		q->head = (q->head + 1) & (q->cap - 1);
		q->len--;
	}
	*dist = 0;
	if (!q->len)
		return UINT64_MAX;
	if (m->pos > i)
		return m->pos - i;
	*dist = m->dist;
	return m->pos + m->len - i;
}

/* The next n bytes as literals. */
static int plain(struct gzreuse *g, size_t n)
{
	int err = 0;

	while (!err && n) {
		size_t k = BLOCK_TOKENS - g->ntok < n ? BLOCK_TOKENS - g->ntok : n;
		const unsigned char *p = g->h + g->cur;
		uint32_t *tok = g->tok + g->ntok;

		for (size_t i = 0; i < k; i++) {
			tok[i] = p[i];
			g->lfreq[p[i]]++;
		}
		g->cur += k;
		g->ntok += (unsigned int)k;
		n -= k;
		if (g->ntok == BLOCK_TOKENS)
			err = flush_block(g, false);
	}
	return err;
}

/*
 * A match of at least min and at most n bytes at cur, where no recorded
 * match holds: a run of one byte (the zeros of a header that grew), or
 * the last such place with the same first four bytes (ids changed the
 * same way in the headers before).  Its length, 0 if none.
 */
static size_t fresh_match(struct gzreuse *g, size_t n, size_t min, unsigned int *dist)
{
	const unsigned char *p = g->h + g->cur;
	uint64_t here = g->hbase + g->cur + 1, was;
	uint32_t hv;
	size_t k;

	if (n > MAX_LEN)
		n = MAX_LEN;
	if (n < 3)
		return 0;
	if (g->cur && p[0] == p[-1] && (k = agree(p, p - 1, n)) >= 3 && k >= min) {
		*dist = 1;
		return k;
	}
	if (n < 4)
		return 0;
	hv = (get32(p) * 2654435761u) >> (32 - HASH_BITS);
	was = g->hash[hv];
	g->hash[hv] = here;
	if (!was || here - was > HIST || here - was > g->cur)
		return 0;
	*dist = (unsigned int)(here - was);
	/* A short far match costs more bits than its literals. */
	k = agree(p, p - *dist, n);
	return k >= (*dist > 4096 ? 7u : 5u) && k >= min ? k : 0;
}

/*
 * The next n bytes, which no recorded match covers, or none that holds;
 * a match found for them may run on to max if it is at least min long.
 */
static int literals(struct gzreuse *g, size_t n, size_t max, size_t min)
{
	int err = 0;

	while (!err && n) {
		unsigned int dist;
		size_t k = fresh_match(g, max, min, &dist);

		if (k) {
			err = emit(g, TOK_MATCH | (uint32_t)k << 16 | dist);
			g->cur += k;
			max -= k;
			n = k < n ? n - k : 0;
			continue;
		}
		err = plain(g, 1);
		max--;
		n--;
	}
	return err;
}

/* Alignment s is in effect from now on; the window keeps what it reaches. */
static void enter(struct gzreuse *g, struct seg s)
{
	unsigned int drop = 0;

	g->fresh = s.fresh;
	if (s.delta == g->past[g->npast - 1].delta)
		return;

	while (drop + 1 < g->npast && g->past[drop + 1].at + HIST <= s.at)
		drop++;
	if (g->npast - drop == SEGS)
		drop++;
	memmove(g->past, g->past + drop, (g->npast - drop) * sizeof(*g->past));
	g->npast -= drop;
	g->past[g->npast++] = s;
}

/*
 * The distance, in the output, from o back to where input offset src
 * went: the same as in the input unless a header between them changed
 * length.  0 if it is out of reach.
 */
static unsigned int moved(const struct gzreuse *g, uint64_t o, uint64_t src)
{
	for (unsigned int k = g->npast; k-- > 0;) {
		const struct seg *s = &g->past[k];

		if ((int64_t)(s->at) + s->delta <= (int64_t)src) {
			int64_t from = (int64_t)src - s->delta;

			return from < (int64_t)o && (int64_t)o - from <= (int64_t)HIST ?
			       (unsigned int)((int64_t)o - from) : 0;
		}
	}
	return 0;
}

/* Codes the output bytes before h[end]. */
static int code_upto(struct gzreuse *g, size_t end)
{
	int err = 0;

	while (!err && g->cur < end) {
		uint64_t o = g->hbase + g->cur, n = 0, run, rec;
		unsigned int dist = 0, lost;
		int64_t delta;

		while (g->nseg && g->seg[0].at <= o) {
			enter(g, g->seg[0]);
			memmove(g->seg, g->seg + 1, --g->nseg * sizeof(*g->seg));
		}
		delta = g->past[g->npast - 1].delta;
		if ((int64_t)o + delta >= 0)
			n = recorded(g, (uint64_t)((int64_t)o + delta), &dist);
		lost = dist;
		if (dist)
			dist = moved(g, o, (uint64_t)((int64_t)o + delta) - dist);
		rec = n;
		if (dist && n >= 3 && dist <= g->cur) {
			if (n > g->hlen - g->cur)
				n = g->hlen - g->cur;
			n = agree(g->h + g->cur, g->h + g->cur - dist, n);
			if (n >= 3) {
				err = emit(g, TOK_MATCH | (uint32_t)n << 16 | dist);
				g->cur += n;
				continue;
			}
		}
		/*
		 * A recorded match that no longer holds: a byte, unless a
		 * match found anew goes further than the recorded one.
		 */
		if (dist) {
			err = literals(g, 1, end - g->cur, rec + 1);
			continue;
		}
		/* One whose source is out of reach now: any match will do. */
		if (lost) {
			err = literals(g, 1, end - g->cur, 3);
			continue;
		}
		/* No match recorded: up to the next one, or alignment change. */
		run = n ? n : 1;
		if (run > end - g->cur)
			run = end - g->cur;
		if (g->nseg && run > g->seg[0].at - o)
			run = g->seg[0].at - o;
		/* Where the input's bytes are, its compressor chose literals. */
		err = g->fresh ? literals(g, run, run, GAP_MIN) : plain(g, run);
	}
	return err;
}

/*
 * The bytes written from at on: from input offset at + delta, or with
 * no place there (new: the alignment stays, a header kept its length
 * perhaps); fresh if they may differ from the input's.
 */
static void set_delta(struct gzreuse *g, uint64_t at, int64_t delta, bool new, bool fresh)
{
	struct seg *last = g->nseg ? &g->seg[g->nseg - 1] : NULL;
	int64_t was = last ? last->delta : g->past[g->npast - 1].delta;

	if (new)
		delta = was;
	if (was == delta && (last ? last->fresh : g->fresh) == fresh)
		return;
	if (last && (last->at == at || g->nseg == SEGS)) {
		/* Only bytes not yet coded are affected: a few hundred. */
		*last = (struct seg){ at, delta, fresh };
		return;
	}
	g->seg[g->nseg++] = (struct seg){ at, delta, fresh };
}

static void make_room(struct gzreuse *g)
{
	size_t drop;

	if (g->hlen < HIST + TAKE || g->cur <= HIST)
		return;
	drop = g->cur - HIST;
	memmove(g->h, g->h + drop, g->hlen - drop);
	g->hbase += drop;
	g->hlen -= drop;
	g->cur -= drop;
}

static const unsigned char gz_header[10] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3 };

int gzreuse_write(struct gzreuse *g, const void *p, size_t len, uint64_t src, bool same)
{
	const unsigned char *b = p;
	int err;

	if (!g->started) {
		put_bytes(g, gz_header, sizeof(gz_header));
		g->started = true;
	}
	g->crc = libdeflate_crc32(g->crc, p, len);
	g->total += len;
	while (len) {
		size_t k;

		make_room(g);
		k = HIST + TAKE - g->hlen < len ? HIST + TAKE - g->hlen : len;
		set_delta(g, g->hbase + g->hlen, (int64_t)(src - (g->hbase + g->hlen)),
			  src == GZ_SRC_NEW, src == GZ_SRC_NEW || !same);
		if (src != GZ_SRC_NEW)
			src += k;
		memcpy(g->h + g->hlen, b, k);
		g->hlen += k;
		b += k;
		len -= k;
		if (g->hlen > MAX_LEN && (err = code_upto(g, g->hlen - MAX_LEN)))
			return err;
	}
	return g->err;
}

int gzreuse_finish(struct gzreuse *g)
{
	unsigned char t[8];
	int err;

	if (!g->started) {
		put_bytes(g, gz_header, sizeof(gz_header));
		g->started = true;
	}
	err = code_upto(g, g->hlen) ?: flush_block(g, true);
	if (err)
		return err;
	put_align(g);
	put32(t, g->crc);
	put32(t + 4, (uint32_t)g->total);
	put_bytes(g, t, sizeof(t));
	out_flush(g);
	return g->err;
}

struct gzreuse *gzreuse_new(struct gz_matches *q, gzreuse_write_fn *fn, void *arg)
{
	struct gzreuse *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->h = calloc(1, HIST + TAKE + 8);	/* agree() reads past the end */
	g->tok = malloc(BLOCK_TOKENS * sizeof(*g->tok));
	if (!g->h || !g->tok) {
		gzreuse_free(g);
		return NULL;
	}
	g->q = q;
	g->fn = fn;
	g->arg = arg;
	g->npast = 1;			/* at 0, the same place in both */
	symbol_tables(g);
	fixed_codes(&g->fix);
	return g;
}

void gzreuse_free(struct gzreuse *g)
{
	if (!g)
		return;
	free(g->h);
	free(g->tok);
	free(g);
}
