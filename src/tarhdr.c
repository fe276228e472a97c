// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The tar stream rewriter.  A header is touched only where the shift
 * must change it, and then in the layout it already had (leading
 * spaces, digit count, terminators), so that an identity map gives the
 * input back byte for byte and a reverse map undoes a shift exactly.
 * All id decisions go through rules.h; here is only tar and pax syntax.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

#include "tarhdr.h"

/* Header field offsets and widths (ustar, with the GNU extras). */
#define F_NAME		0
#define F_MODE		100
#define F_UID		108
#define F_GID		116
#define F_SIZE		124
#define F_MTIME		136
#define F_CKSUM		148
#define F_TYPE		156
#define F_LINK		157
#define F_MAGIC		257
#define F_UNAME		265
#define F_GNAME		297
#define F_PREFIX	345
#define F_GNU_EXT	482	/* old GNU sparse: an extension block follows */
#define F_SPX_EXT	504	/* the same flag in an extension block */
#define W_ID		8
#define W_SIZE		12
#define W_NAMEF		32

enum th_fmt { FMT_V7, FMT_USTAR, FMT_GNU };

/* Data shorter than this is copied here rather than handed to pass(). */
#define TH_PASS_MIN	(64u << 10)

/* The name of the pax headers this code inserts (and may drop again). */
#define OWN_PAX		"PaxHeaders.shiftimg/"

void th_buf_free(struct th_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

int th_buf_add(struct th_buf *b, const void *p, size_t len)
{
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		unsigned char *n;

		while (cap < b->len + len)
			cap *= 2;
		n = realloc(b->p, cap);
		if (!n)
			return -ENOMEM;
		b->p = n;
		b->cap = cap;
	}
	if (len && p)
		memcpy(b->p + b->len, p, len);
	else if (len)
		memset(b->p + b->len, 0, len);
	b->len += len;
	return 0;
}

static int buf_str(struct th_buf *b, const char *s)
{
	return th_buf_add(b, s, strlen(s));
}

void th_ctx_free(struct th_ctx *c)
{
	th_buf_free(&c->meta);
	th_buf_free(&c->pax);
	th_buf_free(&c->out);
	th_buf_free(&c->path);
	th_buf_free(&c->link);
}

static int fail(struct th_ctx *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Names the entry (as far as it is known) and its offset. */
static int fail(struct th_ctx *c, int err, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (c->path.len)
		snprintf(c->err, sizeof(c->err), "entry \"%.*s\" at offset %" PRIu64 ": %s",
			 (int)(c->path.len > 200 ? 200 : c->path.len),
			 (const char *)c->path.p, c->entry_off, why);
	else
		snprintf(c->err, sizeof(c->err), "header at offset %" PRIu64 ": %s",
			 c->entry_off, why);
	return -err;
}

/* ---- numbers ---- */

int th_num_get(const unsigned char *f, size_t w, uint64_t *v)
{
	uint64_t n = 0;
	size_t i = 0;

	if (f[0] & 0x80) {
		/* Base-256, two's complement: 0x80 positive, 0xff negative. */
		if (f[0] & 0x40)
			return -EBADMSG;
		n = f[0] & 0x3f;
		for (i = 1; i < w; i++) {
			if (n >> 56)
				return -EBADMSG;
			n = n << 8 | f[i];
		}
		*v = n;
		return 0;
	}
	while (i < w && f[i] == ' ')
		i++;
	for (; i < w && f[i] >= '0' && f[i] <= '7'; i++) {
		if (n >> 61)
			return -EBADMSG;
		n = n * 8 + (uint64_t)(f[i] - '0');
	}
	for (; i < w; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return -EBADMSG;
	*v = n;
	return 0;
}

/* The digit run of an octal field: [*lead, *lead + *digits). */
static void oct_layout(const unsigned char *f, size_t w, size_t *lead,
		       size_t *digits)
{
	size_t i = 0, d = 0;

	while (i < w && f[i] == ' ')
		i++;
	while (i + d < w && f[i + d] >= '0' && f[i + d] <= '7')
		d++;
	*lead = i;
	*digits = d;
}

static size_t oct_len(uint64_t v)
{
	size_t n = 1;

	while (v >>= 3)
		n++;
	return n;
}

/* Writes v over the digits the field already has; false if too small. */
static bool oct_put(unsigned char *f, size_t w, uint64_t v)
{
	size_t lead, digits, i;

	oct_layout(f, w, &lead, &digits);
	if (digits == 0) {
		/* An empty field: the common layout, digits and a NUL. */
		memset(f, 0, w);
		lead = 0;
		digits = w - 1;
	}
	if (oct_len(v) > digits) {
		if (oct_len(v) > lead + digits)
			return false;
		digits += lead;
		lead = 0;
	}
	for (i = digits; i-- > 0; v >>= 3)
		f[lead + i] = (unsigned char)('0' + (v & 7));
	return true;
}

static void b256_put(unsigned char *f, size_t w, uint64_t v)
{
	size_t i;

	for (i = w; i-- > 1; v >>= 8)
		f[i] = (unsigned char)(v & 0xff);
	f[0] = 0x80;
}

/*
 * Stores an id in an 8-byte field.  A base-256 field that the new
 * value fits in octal goes back to GNU's "%07o\0" (what a GNU writer
 * had there before it needed base-256).
 */
static bool id_put(unsigned char *f, uint64_t v, bool b256_ok)
{
	if (f[0] & 0x80) {
		if (oct_len(v) <= W_ID - 1) {
			memset(f, 0, W_ID);
			return oct_put(f, W_ID, v);
		}
		b256_put(f, W_ID, v);
		return true;
	}
	if (oct_put(f, W_ID, v))
		return true;
	if (!b256_ok)
		return false;
	b256_put(f, W_ID, v);
	return true;
}

/* Fills the digits with 7s: "too large, see the pax record". */
static void id_placeholder(unsigned char *f)
{
	size_t lead, digits;

	if (f[0] & 0x80) {
		memset(f, 0, W_ID);
		memset(f, '7', W_ID - 1);
		return;
	}
	oct_layout(f, W_ID, &lead, &digits);
	if (digits == 0) {
		memset(f, 0, W_ID);
		lead = 0;
		digits = W_ID - 1;
	}
	memset(f + lead, '7', digits);
}

static bool id_is_placeholder(const unsigned char *f)
{
	size_t lead, digits, i;

	if (f[0] & 0x80)
		return false;
	oct_layout(f, W_ID, &lead, &digits);
	for (i = 0; i < digits; i++)
		if (f[lead + i] != '7')
			return false;
	return digits > 0;
}

/* ---- checksums ---- */

/* The four 16-bit lanes of x, added. */
static uint32_t lanes16(uint64_t x)
{
	return (uint32_t)(x & 0xffff) + (uint32_t)((x >> 16) & 0xffff) +
	       (uint32_t)((x >> 32) & 0xffff) + (uint32_t)(x >> 48);
}

/*
 * The unsigned and the historic signed sums, the checksum field counted
 * as spaces.  Every header passes here twice, so the bytes are added
 * eight at a time (GCC does not vectorise the byte loop at -O2): pairs
 * of bytes into 16-bit lanes, and the bytes' top bits into byte lanes;
 * 64 words cannot overflow either.  The checksum field is taken out
 * after.
 */
static void cksum_sums(const unsigned char *blk, uint64_t *u, int64_t *s)
{
	const uint64_t lo = 0x00ff00ff00ff00ffull, top = 0x0101010101010101ull;
	uint64_t pairs = 0, tops = 0;
	uint32_t sum, high;

	for (size_t i = 0; i < TH_BLOCK; i += 8) {
		uint64_t w;

		memcpy(&w, blk + i, sizeof(w));
		pairs += (w & lo) + ((w >> 8) & lo);
		tops += (w >> 7) & top;
	}
	sum = lanes16(pairs);
	high = lanes16((tops & lo) + ((tops >> 8) & lo));
	for (size_t i = F_CKSUM; i < F_CKSUM + 8; i++) {
		sum -= blk[i];
		high -= blk[i] >> 7;
	}
	sum += 8 * ' ';
	*u = sum;
	*s = (int64_t)sum - 256 * (int64_t)high;
}

bool th_cksum_ok(const unsigned char *blk)
{
	uint64_t want, u;
	int64_t s;

	if (th_num_get(blk + F_CKSUM, 8, &want) < 0 || (blk[F_CKSUM] & 0x80))
		return false;
	cksum_sums(blk, &u, &s);
	return want == u || (int64_t)want == s;
}

/* Rewrites the checksum in the layout it had. */
static void cksum_set(unsigned char *blk)
{
	uint64_t u;
	int64_t s;

	cksum_sums(blk, &u, &s);
	if (!oct_put(blk + F_CKSUM, 8, u)) {
		/* Cannot happen (the sum is < 0400000), but stay valid. */
		memcpy(blk + F_CKSUM, "000000", 6);
		blk[F_CKSUM + 6] = 0;
		blk[F_CKSUM + 7] = ' ';
		oct_put(blk + F_CKSUM, 8, u);
	}
}

static bool block_zero(const unsigned char *blk)
{
	size_t i;

	for (i = 0; i < TH_BLOCK; i++)
		if (blk[i])
			return false;
	return true;
}

static enum th_fmt hdr_fmt(const unsigned char *blk)
{
	if (!memcmp(blk + F_MAGIC, "ustar  \0", 8))
		return FMT_GNU;
	if (!memcmp(blk + F_MAGIC, "ustar", 5))
		return FMT_USTAR;
	return FMT_V7;
}

/* ---- input and output ---- */

static int out_write(struct th_ctx *c, const void *p, size_t len)
{
	c->out_bytes += len;
	if (c->discard || !len)
		return 0;
	return c->write(c->io_arg, p, len);
}

/*
 * Writes bytes that were read at input offset src, the same as they were
 * or not (see th_ctx.src).
 */
static int out_write_from(struct th_ctx *c, const void *p, size_t len, uint64_t src,
			  bool same)
{
	int err;

	c->src = src;
	c->src_same = same;
	err = out_write(c, p, len);
	c->src = TH_SRC_NEW;
	return err;
}

static int in_fill(struct th_ctx *c)
{
	ssize_t n;

	if (c->chunk_len || c->eof)
		return 0;
	n = c->read(c->io_arg, &c->chunk);
	if (n < 0)
		return (int)n;
	if (n == 0)
		c->eof = true;
	c->chunk_len = (size_t)n;
	return 0;
}

/* Copies up to n bytes into dst; returns how many (short at the end). */
static ssize_t in_copy(struct th_ctx *c, void *dst, size_t n)
{
	size_t got = 0;
	int err;

	while (got < n) {
		size_t k;

		err = in_fill(c);
		if (err < 0)
			return err;
		if (c->eof)
			break;
		k = n - got < c->chunk_len ? n - got : c->chunk_len;
		memcpy((unsigned char *)dst + got, c->chunk, k);
		c->chunk += k;
		c->chunk_len -= k;
		got += k;
	}
	c->in_bytes += got;
	return (ssize_t)got;
}

/* Passes n input bytes to the output without copying them here. */
static int in_pass(struct th_ctx *c, uint64_t n)
{
	int err;

	while (n) {
		size_t k;

		if (!c->chunk_len && !c->eof && c->pass && !c->discard &&
		    n >= TH_PASS_MIN) {
			err = c->pass(c->io_arg, n);
			if (err == -ENODATA)
				return fail(c, EBADMSG, "truncated: data missing");
			if (err < 0)
				return fail(c, -err, "copy error: %s", strerror(-err));
			c->in_bytes += n;
			c->out_bytes += n;
			return 0;
		}
		err = in_fill(c);
		if (err < 0)
			return fail(c, -err, "read error: %s", strerror(-err));
		if (c->eof)
			return fail(c, EBADMSG, "truncated: %" PRIu64 " bytes of data missing", n);
		k = n < c->chunk_len ? (size_t)n : c->chunk_len;
		err = out_write_from(c, c->chunk, k, c->in_bytes, true);
		if (err < 0)
			return fail(c, -err, "write error: %s", strerror(-err));
		c->chunk += k;
		c->chunk_len -= k;
		c->in_bytes += k;
		n -= k;
	}
	return 0;
}

static uint64_t pad512(uint64_t n)
{
	return (n + TH_BLOCK - 1) / TH_BLOCK * TH_BLOCK;
}

/* ---- pax records ---- */

struct pax_rec {
	size_t off, len;		/* the whole record in the content */
	const char *key;
	size_t klen;
	const char *val;
	size_t vlen;
};

struct pax {
	struct pax_rec *rec;
	size_t nr, cap;
	size_t end;			/* trailing bytes after the last record */
};

static void pax_free(struct pax *x)
{
	free(x->rec);
	memset(x, 0, sizeof(*x));
}

/* Splits "LEN KEY=VALUE\n" records, refusing any inconsistency. */
static int pax_parse(struct th_ctx *c, const unsigned char *p, size_t len,
		     struct pax *x)
{
	size_t off = 0;

	while (off < len) {
		struct pax_rec r = { .off = off };
		uint64_t n = 0;
		size_t i = off;
		const char *eq;

		if (p[off] == '\0')
			break;	/* NUL padding after the records */
		for (; i < len && p[i] >= '0' && p[i] <= '9'; i++) {
			n = n * 10 + (uint64_t)(p[i] - '0');
			if (n > len)
				return fail(c, EBADMSG, "pax record at %zu: length beyond the header", off);
		}
		if (i == off || i >= len || p[i] != ' ')
			return fail(c, EBADMSG, "pax record at %zu: bad length", off);
		if (n < i - off + 4 || n > len - off)
			return fail(c, EBADMSG, "pax record at %zu: length %" PRIu64 " out of range", off, n);
		if (p[off + n - 1] != '\n')
			return fail(c, EBADMSG, "pax record at %zu: no newline at its end", off);
		r.len = (size_t)n;
		r.key = (const char *)p + i + 1;
		eq = memchr(r.key, '=', off + n - 1 - (i + 1));
		if (!eq || eq == r.key)
			return fail(c, EBADMSG, "pax record at %zu: no keyword", off);
		r.klen = (size_t)(eq - r.key);
		r.val = eq + 1;
		r.vlen = (size_t)((const char *)p + off + n - 1 - r.val);
		if (x->nr == x->cap) {
			size_t cap = x->cap ? x->cap * 2 : 16;
			struct pax_rec *nr = realloc(x->rec, cap * sizeof(*nr));

			if (!nr)
				return fail(c, ENOMEM, "out of memory");
			x->rec = nr;
			x->cap = cap;
		}
		x->rec[x->nr++] = r;
		off += (size_t)n;
	}
	x->end = off;
	for (; off < len; off++)
		if (p[off])
			return fail(c, EBADMSG, "pax header: data after the NUL padding");
	return 0;
}

static bool key_is(const struct pax_rec *r, const char *k)
{
	return r->klen == strlen(k) && !memcmp(r->key, k, r->klen);
}

static bool key_prefix(const struct pax_rec *r, const char *k, size_t *plen)
{
	*plen = strlen(k);
	return r->klen > *plen && !memcmp(r->key, k, *plen);
}

bool th_dec_get(const char *s, size_t len, uint64_t max, uint64_t *v)
{
	uint64_t n = 0;
	size_t i;

	if (len == 0 || len > 20)
		return false;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		if (n > (max - (uint64_t)(s[i] - '0')) / 10)
			return false;
		n = n * 10 + (uint64_t)(s[i] - '0');
	}
	*v = n;
	return true;
}

/*
 * Appends "LEN KEY=VALUE\n", LEN counting its own digits.  A record
 * this code adds (an id that outgrew its header field) is written with
 * one leading zero in LEN: readers parse it as the same decimal number,
 * and a later shift knows the record is its own, to drop once the id
 * fits the header again.
 */
static int pax_emit(struct th_buf *b, const char *k, size_t klen,
		    const void *v, size_t vlen, bool mark)
{
	size_t body = klen + vlen + 3 + mark, n = body + 1, d;
	char num[24];
	int err;

	for (;;) {
		d = (size_t)snprintf(num, sizeof(num), "%s%zu", mark ? "0" : "", n);
		if (body - mark + d == n)
			break;
		n = body - mark + d;
	}
	err = th_buf_add(b, num, d);
	err = err ?: th_buf_add(b, " ", 1);
	err = err ?: th_buf_add(b, k, klen);
	err = err ?: th_buf_add(b, "=", 1);
	err = err ?: th_buf_add(b, v, vlen);
	return err ?: th_buf_add(b, "\n", 1);
}

/* ---- base64 and URL encoding (LIBARCHIVE.xattr.*) ---- */

static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_val(char ch)
{
	const char *p = ch ? strchr(b64, ch) : NULL;

	return p ? (int)(p - b64) : -1;
}

int th_b64_decode(const char *in, size_t len, struct th_buf *out)
{
	uint32_t acc = 0;
	unsigned int bits = 0;
	size_t i;

	while (len && in[len - 1] == '=')
		len--;
	for (i = 0; i < len; i++) {
		int v = b64_val(in[i]);
		unsigned char byte;

		if (v < 0)
			return -EBADMSG;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			byte = (unsigned char)(acc >> bits);
			if (th_buf_add(out, &byte, 1))
				return -ENOMEM;
		}
	}
	return 0;
}

void th_b64_encode(const unsigned char *in, size_t len, bool pad,
		   struct th_buf *out)
{
	size_t i;

	for (i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		size_t n = len - i < 3 ? len - i : 3;
		char q[4];

		if (n > 1)
			v |= (uint32_t)in[i + 1] << 8;
		if (n > 2)
			v |= in[i + 2];
		q[0] = b64[v >> 18 & 63];
		q[1] = b64[v >> 12 & 63];
		q[2] = n > 1 ? b64[v >> 6 & 63] : '=';
		q[3] = n > 2 ? b64[v & 63] : '=';
		th_buf_add(out, q, pad ? 4 : n + 1);
	}
}

static int url_decode(const char *in, size_t len, char *out, size_t outlen)
{
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		unsigned int v;
		char hex[3] = { 0 };

		if (o + 1 >= outlen)
			return -EBADMSG;
		if (in[i] != '%') {
			out[o++] = in[i];
			continue;
		}
		if (len - i < 3)
			return -EBADMSG;
		memcpy(hex, in + i + 1, 2);
		if (sscanf(hex, "%2x", &v) != 1 || v == 0)
			return -EBADMSG;
		out[o++] = (char)v;
		i += 2;
	}
	out[o] = '\0';
	return 0;
}

/* ---- one entry ---- */

/* What the shift does to the entry being processed. */
struct ent {
	unsigned char hdr[TH_BLOCK];
	unsigned char xhdr[TH_BLOCK];	/* its pax header, if any */
	bool has_x, own_x, x_first;
	uint64_t x_off;			/* input offset of the pax content */
	enum th_fmt fmt;
	char type;
	uint64_t size;
	/* Ids: the header's, the pax records', their shifted values. */
	uint64_t id_h[2];
	bool pax_id[2];
	uint64_t id_p[2];
	uint32_t id_new[2];
	bool id_changed[2], need_pax[2], drop_rec[2], own_rec[2];
	unsigned int acls, caps, overrides, named;
	int priv;			/* SI_PRIV_* the shift would grant */
	/* SCHILY.xattr.system.posix_acl_access, _default records */
	const struct pax_rec *bin_acl[2];
	const struct pax_rec *name_rec[2];	/* uname, gname records */
	int res;
};

static const char *const id_key[2] = { "uid", "gid" };
static const unsigned int id_field[2] = { F_UID, F_GID };
static const unsigned int name_field[2] = { F_UNAME, F_GNAME };

static void set_path(struct th_ctx *c, const void *p, size_t n)
{
	const unsigned char *s = p;

	while (n && s[n - 1] == '\0')
		n--;
	c->path.len = 0;
	if (th_buf_add(&c->path, s, n) == 0)
		th_buf_add(&c->path, "", 1);
	if (c->path.len)
		c->path.len--;	/* keep the NUL out of the count */
}

/* The ustar name: prefix "/" name (the prefix only in POSIX ustar). */
static void hdr_path(struct th_ctx *c, const unsigned char *h)
{
	char full[260];
	/* star keeps atime and ctime after a 131-byte prefix, "tar" at 508 */
	bool star = !memcmp(h + 508, "tar\0", 4);
	size_t pl = strnlen((const char *)h + F_PREFIX, star ? 131 : 155);
	size_t nl = strnlen((const char *)h, 100);

	if (hdr_fmt(h) == FMT_USTAR && pl && h[F_PREFIX] != '\0') {
		snprintf(full, sizeof(full), "%.*s/%.*s", (int)pl,
			 (const char *)h + F_PREFIX, (int)nl, (const char *)h);
		set_path(c, full, strlen(full));
	} else {
		set_path(c, h, nl);
	}
}

/* An xattr record's value: shifted through si_xattr(). */
static int pax_xattr(struct th_ctx *c, struct ent *e, const char *name,
		     const void *val, size_t vlen, struct th_buf *nv)
{
	size_t outlen = 0;
	int res;

	if (si_xattr_kind(name) == SI_XA_NONE)
		return 0;
	nv->len = 0;
	if (th_buf_add(nv, NULL, SI_XATTR_OUT(vlen)))
		return fail(c, ENOMEM, "out of memory");
	res = si_xattr(c->rules, name, val, vlen, nv->p, &outlen, c->tally);
	if (res < 0)
		return fail(c, EBADMSG, "malformed %s value (%zu bytes)", name, vlen);
	nv->len = outlen;
	if (si_xattr_kind(name) == SI_XA_CAP)
		e->priv |= si_cap_grants_root(val, vlen, nv->p, outlen);
	if (res & SI_CHANGED) {
		switch (si_xattr_kind(name)) {
		case SI_XA_ACL: e->acls++; break;
		case SI_XA_CAP: e->caps++; break;
		case SI_XA_OVERRIDE: e->overrides++; break;
		default: break;
		}
	}
	return res;
}

/* LIBARCHIVE.xattr.NAME=BASE64: decode, shift, encode as it was. */
static int pax_lxattr(struct th_ctx *c, struct ent *e, const struct pax_rec *r,
		      size_t plen, struct th_buf *nv)
{
	struct th_buf raw = { 0 }, shifted = { 0 };
	char name[256];
	int res;

	if (url_decode(r->key + plen, r->klen - plen, name, sizeof(name)) < 0)
		return 0;	/* not a name we could shift anyway */
	if (si_xattr_kind(name) == SI_XA_NONE)
		return 0;
	if (th_b64_decode(r->val, r->vlen, &raw) < 0) {
		th_buf_free(&raw);
		return fail(c, EBADMSG, "%s: bad base64 value", name);
	}
	res = pax_xattr(c, e, name, raw.p, raw.len, &shifted);
	if (res > 0 && (res & SI_CHANGED)) {
		nv->len = 0;
		th_b64_encode(shifted.p, shifted.len,
			      r->vlen && r->val[r->vlen - 1] == '=', nv);
	}
	th_buf_free(&raw);
	th_buf_free(&shifted);
	return res;
}

/* The entry's owner record: pax uname/gname, else the header's. */
static void acl_owner(const struct ent *e, struct th_acl_owner *o)
{
	int k;

	for (k = 0; k < 2; k++) {
		const struct pax_rec *r = e->name_rec[k];

		o->id[k] = (uint32_t)(e->pax_id[k] ? e->id_p[k] : e->id_h[k]);
		if (r) {
			o->name[k] = r->val;
			o->len[k] = r->vlen;
		} else {
			o->name[k] = (const char *)e->hdr + name_field[k];
			o->len[k] = e->fmt == FMT_V7 ? 0 : strnlen(o->name[k], 32);
		}
	}
}

static int acl_text(struct th_ctx *c, struct ent *e, const struct pax_rec *r,
		    const struct pax_rec *b, struct th_buf *nv)
{
	char key[64], why[200];
	struct th_acl_owner own;
	struct th_acl_in in = { c->rules, key_is(r, "SCHILY.acl.ace"), c->keep_names,
				key, r->val, r->vlen, b ? b->val : NULL,
				b ? b->vlen : 0, &own };
	int res;

	snprintf(key, sizeof(key), "%.*s", (int)r->klen, r->key);
	acl_owner(e, &own);
	res = th_acl_text(&in, nv, &e->named, c->tally, why, sizeof(why));
	if (res == -EBADMSG)
		return fail(c, EBADMSG, "malformed %s", key);
	if (res == -EPROTO)
		return fail(c, EPROTO, "%s: %s; refusing to guess which user or group it means",
			    key, why);
	return res;
}

/* The new value of a record: 1 changed (in nv), 0 same, < 0 error. */
static int pax_value(struct th_ctx *c, struct ent *e, const struct pax_rec *r,
		     struct th_buf *nv)
{
	char name[256];
	size_t plen;
	int res = 0;

	nv->len = 0;
	if (key_prefix(r, "SCHILY.xattr.", &plen)) {
		if (r->klen - plen >= sizeof(name))
			return 0;
		memcpy(name, r->key + plen, r->klen - plen);
		name[r->klen - plen] = '\0';
		res = pax_xattr(c, e, name, r->val, r->vlen, nv);
	} else if (key_prefix(r, "LIBARCHIVE.xattr.", &plen)) {
		res = pax_lxattr(c, e, r, plen, nv);
	} else if (key_is(r, "SCHILY.acl.access") ||
		   key_is(r, "SCHILY.acl.default") ||
		   key_is(r, "SCHILY.acl.ace")) {
		const struct pax_rec *b = NULL;

		if (key_is(r, "SCHILY.acl.access"))
			b = e->bin_acl[0];
		else if (key_is(r, "SCHILY.acl.default"))
			b = e->bin_acl[1];
		res = acl_text(c, e, r, b, nv);
		if (res == -ENOMEM)
			return fail(c, ENOMEM, "out of memory");
		if (res & SI_CHANGED)
			e->acls++;
	}
	if (res < 0)
		return res;
	e->res |= res;
	return (res & SI_CHANGED) ? 1 : 0;
}

/* Finds uid, gid, size and path in the pax records (last one wins). */
static int pax_scan(struct th_ctx *c, struct ent *e, const struct pax *x)
{
	size_t i;
	int k;

	for (i = 0; i < x->nr; i++) {
		const struct pax_rec *r = &x->rec[i];
		uint64_t v;

		for (k = 0; k < 2; k++) {
			if (!key_is(r, id_key[k]))
				continue;
			if (!th_dec_get(r->val, r->vlen, SI_ID_MAX, &v))
				return fail(c, EBADMSG, "pax %s \"%.*s\" is not an id",
					    id_key[k], (int)(r->vlen > 20 ? 20 : r->vlen), r->val);
			e->pax_id[k] = true;
			e->id_p[k] = v;
			e->own_rec[k] = c->pax.p[r->off] == '0';
		}
		if (key_is(r, "size")) {
			if (!th_dec_get(r->val, r->vlen, INT64_MAX, &v))
				return fail(c, EBADMSG, "pax size is not a size");
			e->size = v;
		}
		if (key_is(r, "path"))
			set_path(c, r->val, r->vlen);
		if (key_is(r, "SCHILY.xattr.system.posix_acl_access"))
			e->bin_acl[0] = r;
		if (key_is(r, "SCHILY.xattr.system.posix_acl_default"))
			e->bin_acl[1] = r;
		if (key_is(r, "uname"))
			e->name_rec[0] = r;
		if (key_is(r, "gname"))
			e->name_rec[1] = r;
	}
	return 0;
}

static bool names_cleared(const struct th_ctx *c, const struct ent *e, int k)
{
	return !c->keep_names && e->id_changed[k];
}

/*
 * Builds the new pax content into c->out; *changed if it differs,
 * *drop if nothing is left of it.
 */
static int pax_rebuild(struct th_ctx *c, struct ent *e, const struct pax *x,
		       bool *changed, bool *drop)
{
	struct th_buf nv = { 0 };
	size_t i;
	int k, err = 0;

	c->out.len = 0;
	*changed = false;
	for (i = 0; i < x->nr && !err; i++) {
		const struct pax_rec *r = &x->rec[i];
		char num[12];
		int ch = 0;

		if ((key_is(r, "uid") && e->drop_rec[0]) ||
		    (key_is(r, "gid") && e->drop_rec[1])) {
			*changed = true;
			continue;
		}
		for (k = 0; k < 2; k++) {
			if (key_is(r, id_key[k]) && e->id_p[k] != e->id_new[k]) {
				snprintf(num, sizeof(num), "%u", e->id_new[k]);
				nv.len = 0;
				err = buf_str(&nv, num);
				ch = 1;
			}
		}
		if ((key_is(r, "uname") && names_cleared(c, e, 0)) ||
		    (key_is(r, "gname") && names_cleared(c, e, 1))) {
			*changed = true;
			continue;
		}
		if (!ch && !key_is(r, "uid") && !key_is(r, "gid")) {
			ch = pax_value(c, e, r, &nv);
			if (ch < 0) {
				err = ch;
				break;
			}
		}
		if (ch) {
			*changed = true;
			err = pax_emit(&c->out, r->key, r->klen, nv.p, nv.len,
				       c->pax.p[r->off] == '0');
		} else {
			err = th_buf_add(&c->out, c->pax.p + r->off, r->len);
		}
	}
	for (k = 0; k < 2 && !err; k++) {
		char num[12];

		if (!e->need_pax[k])
			continue;
		snprintf(num, sizeof(num), "%u", e->id_new[k]);
		err = pax_emit(&c->out, id_key[k], strlen(id_key[k]), num,
			       strlen(num), true);
		*changed = true;
	}
	if (!err && x->end < c->pax.len)
		err = th_buf_add(&c->out, c->pax.p + x->end, c->pax.len - x->end);
	th_buf_free(&nv);
	if (err)
		return err == -ENOMEM ? fail(c, ENOMEM, "out of memory") : err;
	/* Our own header goes once its ids fit the entry's header again. */
	*drop = *changed && c->out.len == 0 && e->own_x;
	return 0;
}

/*
 * Decides the new ids and writes the header's own fields.  An id that
 * no longer fits gets a pax record (base-256 in GNU and v7 headers); a
 * pax record the header field mirrors (or stands in for, all 7s) keeps
 * the field in step; a record this code added goes once the id fits.
 */
static void shift_ids(struct th_ctx *c, struct ent *e)
{
	bool b256 = e->fmt != FMT_USTAR;
	int k;

	for (k = 0; k < 2; k++) {
		unsigned char *f = e->hdr + id_field[k], tmp[W_ID];
		uint64_t orig = e->pax_id[k] ? e->id_p[k] : e->id_h[k];
		uint32_t to;

		e->res |= si_shift_id(c->rules, (enum si_kind)k, (uint32_t)orig,
				      &to, c->tally);
		e->id_new[k] = to;
		e->id_changed[k] = to != orig;
		if (!e->id_changed[k])
			continue;
		if (!e->pax_id[k]) {
			if (!id_put(f, to, b256)) {
				id_placeholder(f);
				e->need_pax[k] = true;
			}
			continue;
		}
		if (e->id_h[k] != e->id_p[k] && !id_is_placeholder(f))
			continue;	/* the field is something else: leave it */
		memcpy(tmp, f, W_ID);
		if (!(f[0] & 0x80) && oct_put(tmp, W_ID, to)) {
			memcpy(f, tmp, W_ID);
			e->drop_rec[k] = e->own_rec[k];
		} else if (!id_is_placeholder(f)) {
			id_placeholder(f);
		}
	}
}

/* An ustar pax header for an entry that had none: ids that do not fit. */
static void own_xhdr(struct ent *e, size_t size)
{
	unsigned char *x = e->xhdr;
	const char *name = (const char *)e->hdr;
	size_t nl = strnlen(name, 100), pl = strlen(OWN_PAX), i;
	const char *base = name;

	memset(x, 0, TH_BLOCK);
	while (nl > 1 && name[nl - 1] == '/')
		nl--;
	for (i = 0; i + 1 < nl; i++)
		if (name[i] == '/')
			base = name + i + 1;
	nl -= (size_t)(base - name);
	memcpy(x, OWN_PAX, pl);
	memcpy(x + pl, base, nl < 100 - pl ? nl : 100 - pl);
	memcpy(x + F_MODE, "0000644", 7);
	memcpy(x + F_UID, "0000000", 7);
	memcpy(x + F_GID, "0000000", 7);
	memset(x + F_SIZE, '0', W_SIZE - 1);
	oct_put(x + F_SIZE, W_SIZE, size);
	memcpy(x + F_MTIME, e->hdr + F_MTIME, 12);
	memset(x + F_CKSUM, ' ', 8);
	x[F_TYPE] = 'x';
	memcpy(x + F_MAGIC, "ustar\0" "00", 8);
	memcpy(x + F_CKSUM, "000000\0 ", 8);
	cksum_set(x);
}

static const char zeros[TH_BLOCK];

/*
 * Writes rebuilt pax content, telling where its ends that are the old
 * content's (all but the records that changed) were read.
 */
static int out_write_pax(struct th_ctx *c, const struct ent *e)
{
	const unsigned char *o = c->pax.p, *n = c->out.p;
	size_t olen = c->pax.len, nlen = c->out.len, pre = 0, suf = 0;
	int err;

	while (pre < olen && pre < nlen && o[pre] == n[pre])
		pre++;
	while (suf < olen - pre && suf < nlen - pre && o[olen - 1 - suf] == n[nlen - 1 - suf])
		suf++;
	err = out_write_from(c, n, pre, e->x_off, true);
	err = err ?: out_write(c, n + pre, nlen - pre - suf);
	return err ?: out_write_from(c, n + nlen - suf, suf, e->x_off + olen - suf, true);
}

/* Emits the pax header of the entry (as it was, rewritten, or not at all). */
static int emit_x(struct th_ctx *c, struct ent *e, bool changed, bool drop)
{
	int err;

	if (!e->has_x && !changed)
		return 0;
	if (drop)
		return 0;
	if (!changed) {
		/* The padding too is the input's own (read_meta kept it). */
		err = out_write(c, e->xhdr, TH_BLOCK);
		return err ?: out_write(c, c->pax.p, (size_t)pad512(c->pax.len));
	}
	if (!e->has_x) {
		own_xhdr(e, c->out.len);
	} else {
		if (!oct_put(e->xhdr + F_SIZE, W_SIZE, c->out.len))
			return fail(c, EOVERFLOW, "pax header grew too large");
		cksum_set(e->xhdr);
	}
	err = out_write(c, e->xhdr, TH_BLOCK);
	err = err ?: out_write_pax(c, e);
	return err ?: out_write(c, zeros, pad512(c->out.len) - c->out.len);
}

static void count_entry(struct th_ctx *c, struct ent *e)
{
	struct shiftimg_stats *st = &c->tally->st;
	char what[96] = "";
	bool changed = e->id_changed[0] || e->id_changed[1] || e->acls ||
		       e->caps || e->overrides;

	st->objects++;
	if (e->type == '1')
		st->hardlinks++;
	st->acls += e->acls;
	st->caps += e->caps;
	st->override_stat += e->overrides;
	if (changed)
		st->changed++;
	si_tally_object(c->tally, c->path.len ? (const char *)c->path.p : "?");
	if (!changed || !c->list)
		return;
	snprintf(what, sizeof(what), "%s%s%s%s%s%s", e->id_changed[0] ? "uid " : "",
		 e->id_changed[1] ? "gid " : "", e->acls ? "acl " : "",
		 e->caps ? "cap " : "", e->overrides ? "override_stat " : "",
		 e->named ? "acl-names-kept " : "");
	what[strlen(what) - 1] = '\0';
	c->list(c->list_arg, (const char *)c->path.p, what);
}

/* Bytes of data after the header (and old GNU sparse extension blocks). */
static bool type_has_data(const struct ent *e)
{
	switch (e->type) {
	case '2': case '3': case '4': case '5': case '6':
		return false;
	case '1':
		return e->has_x;	/* pax allows a hard link with data */
	}
	return true;
}

static int copy_sparse_ext(struct th_ctx *c, const unsigned char *hdr)
{
	unsigned char blk[TH_BLOCK];
	bool more = hdr[F_GNU_EXT] != 0;
	int err;

	while (more) {
		ssize_t n = in_copy(c, blk, TH_BLOCK);

		if (n < 0)
			return fail(c, (int)-n, "read error: %s", strerror((int)-n));
		if (n < TH_BLOCK)
			return fail(c, EBADMSG, "truncated sparse extension header");
		more = blk[F_SPX_EXT] != 0;
		err = out_write(c, blk, TH_BLOCK);
		if (err < 0)
			return fail(c, -err, "write error: %s", strerror(-err));
	}
	return 0;
}

/*
 * The privilege rule: setuid/setgid root or real root's capabilities
 * the shift would give a regular file (a hard link has its target's).
 */
static void check_privileged(struct th_ctx *c, struct ent *e)
{
	uint64_t mode, old[2];
	int k;

	if ((e->type == '0' || e->type == '\0' || e->type == '7') &&
	    th_num_get(e->hdr + F_MODE, W_ID, &mode) == 0) {
		for (k = 0; k < 2; k++)
			old[k] = e->pax_id[k] ? e->id_p[k] : e->id_h[k];
		e->priv |= si_grants_root(S_IFREG | (mode & 07777),
					  (uint32_t)old[0], (uint32_t)old[1],
					  e->id_new[0], e->id_new[1]);
	}
	if (!e->priv)
		return;
	si_tally_privileged(c->tally, c->path.len ? (const char *)c->path.p : "?");
	if (c->stop_on_privileged && !c->privileged) {
		c->privileged = true;
		c->discard = true;
	}
}

static int process_entry(struct th_ctx *c, struct ent *e)
{
	struct pax x = { 0 };
	unsigned char orig[TH_BLOCK];
	bool xchanged = false, drop = false;
	int k, err;

	memcpy(orig, e->hdr, TH_BLOCK);
	e->fmt = hdr_fmt(e->hdr);
	e->type = (char)e->hdr[F_TYPE];
	if (!c->path.len)
		hdr_path(c, e->hdr);
	for (k = 0; k < 2; k++)
		if (th_num_get(e->hdr + id_field[k], W_ID, &e->id_h[k]) < 0 ||
		    e->id_h[k] > SI_ID_MAX) {
			err = fail(c, EBADMSG, "bad %s field", id_key[k]);
			goto out;
		}
	if (th_num_get(e->hdr + F_SIZE, W_SIZE, &e->size) < 0 || e->size > INT64_MAX) {
		err = fail(c, EBADMSG, "bad size field");
		goto out;
	}
	if (e->has_x) {
		err = pax_parse(c, c->pax.p, c->pax.len, &x);
		err = err ?: pax_scan(c, e, &x);
		if (err)
			goto out;
	}
	shift_ids(c, e);
	if (e->has_x || e->need_pax[0] || e->need_pax[1]) {
		err = pax_rebuild(c, e, &x, &xchanged, &drop);
		if (err)
			goto out;
	}
	for (k = 0; k < 2; k++)
		if (names_cleared(c, e, k) && e->fmt != FMT_V7)
			memset(e->hdr + name_field[k], 0, W_NAMEF);
	if (memcmp(orig, e->hdr, TH_BLOCK))
		cksum_set(e->hdr);

	count_entry(c, e);
	check_privileged(c, e);
	if (c->stop_on_unmapped && (e->res & SI_UNMAPPED) && !c->unmapped) {
		c->unmapped = true;
		c->discard = true;
	}
	if (!e->x_first) {
		err = out_write(c, c->meta.p, c->meta.len);
		if (err)
			goto out_write;
	}
	err = emit_x(c, e, xchanged, drop);
	if (!err && e->x_first)
		err = out_write(c, c->meta.p, c->meta.len);
	/* The header is the last block read. */
	err = err ?: out_write_from(c, e->hdr, TH_BLOCK, c->in_bytes - TH_BLOCK, false);
	if (err)
		goto out_write;
	if (e->type == 'S') {
		err = copy_sparse_ext(c, e->hdr);
		if (err)
			goto out;
	}
	err = type_has_data(e) ? in_pass(c, pad512(e->size)) : 0;
	goto out;
out_write:
	err = fail(c, -err, "write error: %s", strerror(-err));
out:
	pax_free(&x);
	return err;
}

/* ---- meta headers: x, g, L, K ---- */

/* Reads a meta header's content (size bytes, padded) into b. */
static int read_meta(struct th_ctx *c, const unsigned char *hdr,
		     struct th_buf *b, uint64_t *size)
{
	ssize_t n;

	if (th_num_get(hdr + F_SIZE, W_SIZE, size) < 0)
		return fail(c, EBADMSG, "bad size field");
	if (*size > TH_META_MAX)
		return fail(c, EBADMSG, "%c header of %" PRIu64 " bytes (limit %u)",
			    hdr[F_TYPE], *size, TH_META_MAX);
	b->len = 0;
	if (th_buf_add(b, NULL, (size_t)pad512(*size)))
		return fail(c, ENOMEM, "out of memory");
	n = in_copy(c, b->p, b->len);
	if (n < 0)
		return fail(c, (int)-n, "read error: %s", strerror((int)-n));
	if ((size_t)n < b->len)
		return fail(c, EBADMSG, "truncated %c header", hdr[F_TYPE]);
	return 0;
}

/* A global pax header: its ids are shifted, it is emitted at once. */
static int do_global(struct th_ctx *c, const unsigned char *hdr)
{
	struct ent e = { 0 };
	struct pax x = { 0 };
	uint64_t size;
	bool changed = false, drop = false;
	int k, err;

	e.x_off = c->in_bytes;
	err = read_meta(c, hdr, &c->pax, &size);
	if (err)
		return err;
	c->pax.len = (size_t)size;
	memcpy(e.xhdr, hdr, TH_BLOCK);
	e.has_x = true;
	err = pax_parse(c, c->pax.p, c->pax.len, &x);
	err = err ?: pax_scan(c, &e, &x);
	if (err)
		goto out;
	for (k = 0; k < 2; k++) {
		if (!e.pax_id[k])
			continue;
		e.res |= si_shift_id(c->rules, (enum si_kind)k,
				     (uint32_t)e.id_p[k], &e.id_new[k], c->tally);
		e.id_changed[k] = e.id_new[k] != e.id_p[k];
	}
	err = pax_rebuild(c, &e, &x, &changed, &drop);
	err = err ?: emit_x(c, &e, changed, false);
	si_tally_object(c->tally, "(global pax header)");
out:
	pax_free(&x);
	c->path.len = 0;
	return err;
}

/* Appends a header and its padded content to the pending meta bytes. */
static int keep_meta(struct th_ctx *c, const unsigned char *hdr,
		     const struct th_buf *content)
{
	if (c->meta.len + TH_BLOCK + content->len > TH_PENDING_MAX)
		return fail(c, EBADMSG, "long-name headers of more than %u bytes for one entry",
			    TH_PENDING_MAX);
	if (th_buf_add(&c->meta, hdr, TH_BLOCK) ||
	    th_buf_add(&c->meta, content->p, content->len))
		return fail(c, ENOMEM, "out of memory");
	return 0;
}

/* After the end-of-archive block: zeros only, copied as they are. */
static int do_trailer(struct th_ctx *c, const unsigned char *blk)
{
	uint64_t total = 0;
	int err;

	err = out_write(c, blk, TH_BLOCK);
	if (err)
		return fail(c, -err, "write error: %s", strerror(-err));
	for (;;) {
		size_t i;

		err = in_fill(c);
		if (err)
			return fail(c, -err, "read error: %s", strerror(-err));
		if (c->eof)
			break;
		for (i = 0; i < c->chunk_len; i++)
			if (c->chunk[i])
				return fail(c, EBADMSG, "data after the end-of-archive marker");
		total += c->chunk_len;
		if (total > TH_TRAILER_MAX)
			return fail(c, EBADMSG, "more than %u bytes after the end-of-archive marker",
				    TH_TRAILER_MAX);
		err = out_write_from(c, c->chunk, c->chunk_len, c->in_bytes, true);
		if (err)
			return fail(c, -err, "write error: %s", strerror(-err));
		c->in_bytes += c->chunk_len;
		c->chunk_len = 0;
	}
	return 0;
}

static void reset_pending(struct th_ctx *c, struct ent *e)
{
	c->meta.len = 0;
	c->pax.len = 0;
	c->path.len = 0;
	memset(e, 0, sizeof(*e));
}

int th_stream(struct th_ctx *c)
{
	struct ent *e = calloc(1, sizeof(*e));
	struct th_buf tmp = { 0 };
	unsigned char blk[TH_BLOCK];
	uint64_t size;
	int err = 0;

	if (!e)
		return fail(c, ENOMEM, "out of memory");
	c->err[0] = '\0';
	c->src = TH_SRC_NEW;
	for (;;) {
		ssize_t n;

		c->entry_off = c->in_bytes;
		n = in_copy(c, blk, TH_BLOCK);
		if (n < 0) {
			err = fail(c, (int)-n, "read error: %s", strerror((int)-n));
			break;
		}
		if (n == 0) {
			err = fail(c, EBADMSG, "truncated: no end-of-archive marker");
			break;
		}
		if (n < TH_BLOCK) {
			err = fail(c, EBADMSG, "truncated header (%zd bytes)", n);
			break;
		}
		if (block_zero(blk)) {
			if (c->meta.len || e->has_x) {
				err = fail(c, EBADMSG, "end of archive after an extended header");
				break;
			}
			err = do_trailer(c, blk);
			break;
		}
		if (!th_cksum_ok(blk)) {
			err = fail(c, EBADMSG, "bad header checksum");
			break;
		}
		switch (blk[F_TYPE]) {
		case 'x': case 'X':
			if (e->has_x) {
				err = fail(c, EBADMSG, "two pax headers for one entry");
				break;
			}
			e->x_off = c->in_bytes;
			err = read_meta(c, blk, &c->pax, &size);
			if (err)
				break;
			c->pax.len = (size_t)size;
			memcpy(e->xhdr, blk, TH_BLOCK);
			e->has_x = true;
			e->x_first = c->meta.len == 0;
			e->own_x = !strncmp((const char *)blk, OWN_PAX, strlen(OWN_PAX));
			break;
		case 'g':
			err = do_global(c, blk);
			break;
		case 'L': case 'K':
			err = read_meta(c, blk, &tmp, &size);
			if (!err && blk[F_TYPE] == 'L')
				set_path(c, tmp.p, (size_t)size);
			err = err ?: keep_meta(c, blk, &tmp);
			break;
		case 'V':
			/* A volume label: no owner, copied as it is. */
			err = out_write(c, blk, TH_BLOCK);
			err = err ? fail(c, -err, "write error: %s", strerror(-err)) : 0;
			if (!err && th_num_get(blk + F_SIZE, W_SIZE, &size) < 0)
				err = fail(c, EBADMSG, "bad size field");
			err = err ?: in_pass(c, pad512(size));
			break;
		default:
			memcpy(e->hdr, blk, TH_BLOCK);
			err = process_entry(c, e);
			reset_pending(c, e);
			break;
		}
		if (err)
			break;
	}
	if (!err && c->unmapped) {
		snprintf(c->err, sizeof(c->err), "unmapped ids: output stopped");
		err = -EOVERFLOW;
	}
	if (!err && c->privileged) {
		snprintf(c->err, sizeof(c->err), "entries would grant real root: output stopped");
		err = -EPERM;
	}
	free(e);
	th_buf_free(&tmp);
	return err;
}
