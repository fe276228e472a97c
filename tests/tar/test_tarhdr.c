// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The tar header rewriter on crafted buffers: exact bytes for good
 * input, a clear refusal for bad input.  The input is fed in small odd
 * chunks so that every block boundary falls inside a read.
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

#include "tarhdr.h"

#define BLK TH_BLOCK

struct mem {
	const unsigned char *p;
	size_t len, off, step;
	struct th_buf out;
};

static ssize_t mem_read(void *arg, const unsigned char **p)
{
	struct mem *m = arg;
	size_t n = m->len - m->off < m->step ? m->len - m->off : m->step;

	*p = m->p + m->off;
	m->off += n;
	return (ssize_t)n;
}

static int mem_write(void *arg, const void *p, size_t len)
{
	struct mem *m = arg;

	return th_buf_add(&m->out, p, len);
}

static struct si_rules rules;
static struct si_tally tally;

/* uid and gid: 0..65535 -> 100000.., and 3000000..3000999 -> 100.. */
static void set_map(uint32_t base)
{
	char err[128];
	int k;

	memset(&rules, 0, sizeof(rules));
	for (k = 0; k < 2; k++) {
		si_idmap_add(&rules.map[k], 0, base, 65536, err, sizeof(err));
		si_idmap_add(&rules.map[k], 3000000, 100, 1000, err, sizeof(err));
	}
	rules.unmapped = SHIFTIMG_UNMAPPED_FAIL;
}

static void reverse(void)
{
	struct si_rules inv = rules;

	si_idmap_invert(&rules.map[0], &inv.map[0]);
	si_idmap_invert(&rules.map[1], &inv.map[1]);
	rules = inv;
}

/* Runs the rewriter; returns its result, output in m->out. */
static int run(struct mem *m, const void *in, size_t len, char *err)
{
	struct th_ctx c = { 0 };
	int ret;

	memset(m, 0, sizeof(*m));
	m->p = in;
	m->len = len;
	m->step = 7;
	si_tally_free(&tally);
	c.rules = &rules;
	c.tally = &tally;
	c.stop_on_unmapped = true;
	c.read = mem_read;
	c.write = mem_write;
	c.io_arg = m;
	ret = th_stream(&c);
	if (err)
		snprintf(err, 512, "%s", c.err);
	th_ctx_free(&c);
	return ret;
}

static void oct(unsigned char *f, size_t w, uint64_t v)
{
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "%0*llo", (int)w - 1, (unsigned long long)v);
	memcpy(f, tmp, w - 1);
	f[w - 1] = 0;
}

static void cksum(unsigned char *h)
{
	unsigned int s = 0, i;

	memset(h + 148, ' ', 8);
	for (i = 0; i < BLK; i++)
		s += h[i];
	snprintf((char *)h + 148, 8, "%06o", s);
	h[155] = ' ';
}

enum fmt { USTAR, GNU, V7 };

/* A header as GNU tar writes it. */
static void hdr(unsigned char *h, const char *name, char type, uint64_t uid,
		uint64_t gid, uint64_t size, enum fmt f)
{
	memset(h, 0, BLK);
	strncpy((char *)h, name, 100);
	oct(h + 100, 8, 0644);
	oct(h + 108, 8, uid);
	oct(h + 116, 8, gid);
	oct(h + 124, 12, size);
	oct(h + 136, 12, 1700000000);
	h[156] = (unsigned char)type;
	if (f == USTAR)
		memcpy(h + 257, "ustar\0" "00", 8);
	else if (f == GNU)
		memcpy(h + 257, "ustar  \0", 8);
	if (f != V7) {
		strcpy((char *)h + 265, "alice");
		strcpy((char *)h + 297, "staff");
	}
	cksum(h);
}

/* An archive: blocks appended, then the two zero blocks. */
struct arc {
	unsigned char b[64 * BLK];
	size_t len;
};

static unsigned char *blk(struct arc *a)
{
	unsigned char *p = a->b + a->len;

	memset(p, 0, BLK);
	a->len += BLK;
	return p;
}

/* Appends n bytes of p (NULL: of 'x'), padded to whole blocks. */
static void data(struct arc *a, const void *p, size_t n)
{
	while (n) {
		size_t k = n < BLK ? n : BLK;

		if (p) {
			memcpy(blk(a), p, k);
			p = (const char *)p + k;
		} else {
			memset(blk(a), 'x', k);
		}
		n -= k;
	}
}

static void end(struct arc *a)
{
	blk(a);
	blk(a);
}

/* A pax header with the given records, then its entry. */
static void pax(struct arc *a, const char *recs, char type)
{
	hdr(blk(a), "PaxHeader/f", type, 0, 0, strlen(recs), USTAR);
	data(a, recs, strlen(recs));
}

/* "LEN KEY=VALUE\n" with the right LEN (two digits are enough here). */
static const char *rec(const char *kv)
{
	static char buf[4][256];
	static int i;
	char *b = buf[i++ % 4];

	snprintf(b, 256, "%zu %s\n", strlen(kv) + 4, kv);
	return b;
}

static uint64_t field(const unsigned char *f, size_t w)
{
	uint64_t v = 0;

	assert_int_equal(th_num_get(f, w, &v), 0);
	return v;
}

/* ---- numbers ---- */

static void test_numbers(void **state)
{
	unsigned char f[12];
	uint64_t v;

	memcpy(f, "0001750\0", 8);
	assert_int_equal(th_num_get(f, 8, &v), 0);
	assert_int_equal(v, 1000);
	memcpy(f, " 01750 \0", 8);
	assert_int_equal(th_num_get(f, 8, &v), 0);
	assert_int_equal(v, 1000);
	memcpy(f, "\0\0\0\0\0\0\0\0", 8);
	assert_int_equal(th_num_get(f, 8, &v), 0);
	assert_int_equal(v, 0);
	memcpy(f, "\x80\0\0\0\0\x2d\xc6\xc0", 8);
	assert_int_equal(th_num_get(f, 8, &v), 0);
	assert_int_equal(v, 3000000);
	/* negative base-256, bad digits, junk after the terminator */
	memcpy(f, "\xff\xff\xff\xff\xff\xff\xff\xfe", 8);
	assert_int_equal(th_num_get(f, 8, &v), -EBADMSG);
	memcpy(f, "0001790\0", 8);
	assert_int_equal(th_num_get(f, 8, &v), -EBADMSG);
	memcpy(f, "00017\0x\0", 8);
	assert_int_equal(th_num_get(f, 8, &v), -EBADMSG);
	/* base-256 past 64 bits */
	memcpy(f, "\x80\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 12);
	assert_int_equal(th_num_get(f, 12, &v), -EBADMSG);
}

/* Checksums: the unsigned sum, or the signed one old writers made. */
static void test_cksum(void **state)
{
	unsigned char h[BLK];
	int sum = 0, i;

	hdr(h, "caf\xc3\xa9-\xff", '0', 1, 2, 0, USTAR);
	assert_true(th_cksum_ok(h));
	memset(h + 148, ' ', 8);
	for (i = 0; i < BLK; i++)
		sum += (signed char)h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	assert_true(th_cksum_ok(h));
	h[0] = 'C';
	assert_false(th_cksum_ok(h));

	/* Any bytes at all, up to 0xff everywhere: both sums, and one off. */
	for (int round = 0; round < 200; round++) {
		unsigned int u = 0;

		sum = 0;
		for (i = 0; i < BLK; i++)
			h[i] = round == 0 ? 0xff : (unsigned char)rand();
		memset(h + 148, ' ', 8);
		for (i = 0; i < BLK; i++) {
			u += h[i];
			sum += (signed char)h[i];
		}
		snprintf((char *)h + 148, 8, "%06o", (u + 1) & 0777777);
		assert_false(th_cksum_ok(h));
		snprintf((char *)h + 148, 8, "%06o", u & 0777777);
		assert_true(th_cksum_ok(h));
		if (sum >= 0) {
			snprintf((char *)h + 148, 8, "%06o", (unsigned int)sum & 0777777);
			assert_true(th_cksum_ok(h));
		}
	}
}

/* ---- exact bytes ---- */

static void test_identity(void **state)
{
	struct arc a = { .len = 0 };
	struct mem m;

	hdr(blk(&a), "dir/", '5', 0, 0, 0, USTAR);
	hdr(blk(&a), "dir/file", '0', 1000, 1000, 600, USTAR);
	data(&a, NULL, 600);
	pax(&a, rec("SCHILY.xattr.user.foo=bar"), 'x');
	hdr(blk(&a), "dir/p", '0', 5, 5, 0, USTAR);
	hdr(blk(&a), "g", '0', 3000000, 3000001, 0, GNU);
	end(&a);
	memset(&rules, 0, sizeof(rules));
	{
		char err[64];

		si_idmap_add(&rules.map[0], 0, 0, SI_ID_MAX, err, sizeof(err));
		si_idmap_add(&rules.map[1], 0, 0, SI_ID_MAX, err, sizeof(err));
	}
	assert_int_equal(run(&m, a.b, a.len, NULL), 0);
	assert_int_equal(m.out.len, a.len);
	assert_memory_equal(m.out.p, a.b, a.len);
	assert_int_equal(tally.st.objects, 4);
	assert_int_equal(tally.st.changed, 0);
	th_buf_free(&m.out);
}

static void test_shift_ustar(void **state)
{
	struct arc a = { .len = 0 };
	unsigned char want[BLK];
	struct mem m;
	size_t i;

	set_map(100000);
	hdr(blk(&a), "file", '0', 1000, 50, 3, USTAR);
	data(&a, "abc", 3);
	end(&a);
	assert_int_equal(run(&m, a.b, a.len, NULL), 0);
	assert_int_equal(m.out.len, a.len);
	/* only uid, gid, the names and the checksum change */
	hdr(want, "file", '0', 101000, 100050, 3, USTAR);
	memset(want + 265, 0, 64);
	cksum(want);
	assert_memory_equal(m.out.p, want, BLK);
	assert_true(th_cksum_ok(m.out.p));
	for (i = BLK; i < a.len; i++)
		assert_int_equal(m.out.p[i], a.b[i]);
	assert_int_equal(tally.st.changed, 1);
	th_buf_free(&m.out);
}

/* A ustar id that outgrows octal gets a pax record; reverse removes it. */
static void test_ustar_overflow_roundtrip(void **state)
{
	struct arc a = { .len = 0 };
	struct mem m, back;
	unsigned char *copy;
	size_t len;

	set_map(3000000);
	hdr(blk(&a), "some/dir/file", '0', 7, 8, 1, USTAR);
	data(&a, "z", 1);
	end(&a);
	assert_int_equal(run(&m, a.b, a.len, NULL), 0);
	assert_int_equal(m.out.len, a.len + 2 * BLK);
	assert_int_equal(m.out.p[156], 'x');
	assert_true(th_cksum_ok(m.out.p));
	assert_true(th_cksum_ok(m.out.p + 2 * BLK));
	assert_memory_equal(m.out.p + BLK, "016 uid=3000007\n016 gid=3000008\n", 32);
	assert_int_equal(field(m.out.p + 124, 12), 32);
	/* the header keeps a placeholder in its own field */
	assert_memory_equal(m.out.p + 2 * BLK + 108, "7777777", 7);

	len = m.out.len;
	copy = m.out.p;
	reverse();
	assert_int_equal(run(&back, copy, len, NULL), 0);
	free(copy);
	/* names were cleared on the way out: compare all but those */
	assert_int_equal(back.out.len, a.len);
	assert_memory_equal(back.out.p, a.b, 148);
	assert_memory_equal(back.out.p + 156, a.b + 156, 265 - 156);
	assert_memory_equal(back.out.p + BLK, a.b + BLK, a.len - BLK);
	th_buf_free(&back.out);
}

static void test_gnu_base256(void **state)
{
	struct arc a = { .len = 0 };
	struct mem m;

	set_map(3000000);
	hdr(blk(&a), "f", '0', 1, 2, 0, GNU);
	end(&a);
	assert_int_equal(run(&m, a.b, a.len, NULL), 0);
	assert_int_equal(m.out.len, a.len);
	assert_int_equal(m.out.p[108], 0x80);
	assert_int_equal(field(m.out.p + 108, 8), 3000001);
	assert_int_equal(field(m.out.p + 116, 8), 3000002);
	assert_true(th_cksum_ok(m.out.p));
	th_buf_free(&m.out);
}

/* pax ids, xattrs (raw and LIBARCHIVE base64) and text ACLs. */
static void test_pax_records(void **state)
{
	static const unsigned char cap2[20] = {
		0, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
	struct arc a = { .len = 0 };
	struct th_buf recs = { 0 }, b64 = { 0 };
	char line[512], *out;
	struct mem m;

	set_map(100000);
	th_b64_encode(cap2, sizeof(cap2), false, &b64);
	th_buf_add(&b64, "", 1);	/* a string, for strstr() below */
	b64.len--;
	snprintf(line, sizeof(line), "%zu LIBARCHIVE.xattr.security.capability=%.*s\n",
		 (size_t)(strlen("LIBARCHIVE.xattr.security.capability=") + b64.len + 4),
		 (int)b64.len, (const char *)b64.p);
	th_buf_add(&recs, rec("uid=1000"), strlen(rec("uid=1000")));
	th_buf_add(&recs, line, strlen(line));
	{
		const char *r = rec("SCHILY.acl.access=user::rw-,user:bob:r--:1001,group:7:r--");

		th_buf_add(&recs, r, strlen(r));
	}
	th_buf_add(&recs, "", 1);
	recs.len--;
	pax(&a, (const char *)recs.p, 'x');
	hdr(blk(&a), "f", '0', 1000, 1000, 0, USTAR);
	end(&a);
	assert_int_equal(run(&m, a.b, a.len, NULL), 0);
	out = strndup((const char *)m.out.p + BLK, field(m.out.p + 124, 12));
	assert_non_null(strstr(out, " uid=101000\n"));
	assert_non_null(strstr(out, "SCHILY.acl.access=user::rw-,user:101001:r--:101001,group:100007:r--\n"));
	assert_non_null(strstr(out, "LIBARCHIVE.xattr.security.capability="));
	assert_null(strstr(out, (const char *)b64.p));
	assert_int_equal(tally.st.caps, 1);
	assert_int_equal(tally.st.acls, 1);
	free(out);
	th_buf_free(&m.out);
	th_buf_free(&recs);
	th_buf_free(&b64);
}

/* A global pax header: its ids are shifted and it stays where it was. */
static void test_global(void **state)
{
	struct arc a = { .len = 0 };
	const char *recs = "12 uid=1000\n12 gid=2000\n";
	char *g;
	struct mem m;

	set_map(100000);
	hdr(blk(&a), "GlobalHead", 'g', 0, 0, strlen(recs), USTAR);
	data(&a, recs, strlen(recs));
	hdr(blk(&a), "f", '0', 1000, 2000, 0, USTAR);
	end(&a);
	assert_int_equal(run(&m, a.b, a.len, NULL), 0);
	assert_int_equal(m.out.p[156], 'g');
	assert_true(th_cksum_ok(m.out.p));
	g = strndup((const char *)m.out.p + BLK, field(m.out.p + 124, 12));
	assert_string_equal(g, "14 uid=101000\n14 gid=102000\n");
	free(g);
	/* the global header's own ids own nothing: left alone */
	assert_int_equal(field(m.out.p + 108, 8), 0);
	assert_int_equal(field(m.out.p + 2 * BLK + 108, 8), 101000);
	assert_int_equal(field(m.out.p + 2 * BLK + 116, 8), 102000);
	th_buf_free(&m.out);
}

/* LIBARCHIVE.xattr names may be URL-encoded: decoded to find the kind. */
static void test_lxattr_urlname(void **state)
{
	static const unsigned char cap3[24] = {
		0, 0, 0, 3, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0xe8, 3, 0, 0 };
	struct arc a = { .len = 0 };
	struct th_buf b64 = { 0 }, raw = { 0 };
	char line[256], *out, *v;
	const char *key = "LIBARCHIVE.xattr.security%2Ecapability=";
	struct mem m;

	set_map(100000);
	th_b64_encode(cap3, sizeof(cap3), true, &b64);
	snprintf(line, sizeof(line), "%zu %s%.*s\n",
		 strlen(key) + b64.len + 4, key, (int)b64.len, (const char *)b64.p);
	pax(&a, line, 'x');
	hdr(blk(&a), "f", '0', 0, 0, 0, USTAR);
	end(&a);
	assert_int_equal(run(&m, a.b, a.len, NULL), 0);
	out = strndup((const char *)m.out.p + BLK, field(m.out.p + 124, 12));
	v = strstr(out, key);
	assert_non_null(v);
	v += strlen(key);
	assert_int_equal(th_b64_decode(v, strcspn(v, "\n"), &raw), 0);
	assert_int_equal(raw.len, sizeof(cap3));
	/* the v3 rootid 1000 became 101000 (0x18aa8) */
	assert_int_equal(raw.p[20] | raw.p[21] << 8 | raw.p[22] << 16, 101000);
	assert_int_equal(tally.st.caps, 1);
	free(out);
	th_buf_free(&raw);
	th_buf_free(&b64);
	th_buf_free(&m.out);
}

/* A text ACL through th_acl_text(); the result NUL-terminated in *out. */
static int acl(const char *text, const unsigned char *bin, size_t binlen,
	       const struct th_acl_owner *own, bool nfs4, bool keep, struct th_buf *out,
	       unsigned int *named, char *why)
{
	struct th_acl_in in = { &rules, nfs4, keep, "SCHILY.acl.access", text,
				strlen(text), bin, binlen, own };
	int res;

	out->len = 0;
	why[0] = '\0';
	res = th_acl_text(&in, out, named, NULL, why, 200);
	th_buf_add(out, "", 1);
	return res;
}

/* user_obj, user A (perm pa), user B (perm pb), group_obj, mask, other */
static void bin_two(unsigned char *b, uint32_t a, int pa, uint32_t bb, int pb)
{
	static const unsigned char head[] = { 2, 0, 0, 0, 1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff };
	static const unsigned char tail[] = { 4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
		0x10, 0, 6, 0, 0xff, 0xff, 0xff, 0xff, 0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff };
	unsigned char *p = b;

	memcpy(p, head, sizeof(head));
	p += sizeof(head);
	*p++ = 2; *p++ = 0; *p++ = (unsigned char)pa; *p++ = 0;
	*p++ = a & 0xff; *p++ = a >> 8 & 0xff; *p++ = a >> 16 & 0xff; *p++ = a >> 24;
	*p++ = 2; *p++ = 0; *p++ = (unsigned char)pb; *p++ = 0;
	*p++ = bb & 0xff; *p++ = bb >> 8 & 0xff; *p++ = bb >> 16 & 0xff; *p++ = bb >> 24;
	memcpy(p, tail, sizeof(tail));
}
#define BIN_TWO	(12 + 16 + 24)

static void test_acl_text(void **state)
{
	struct th_buf out = { 0 };
	unsigned int named = 0;
	/* binary ACL: user_obj, user 1000, group_obj, other */
	static const unsigned char bin[4 + 4 * 8] = {
		2, 0, 0, 0, 1, 0, 7, 0, 0xff, 0xff, 0xff, 0xff,
		2, 0, 6, 0, 0xe8, 3, 0, 0, 4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
		0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff };
	const char *gnu = "user::rwx\nuser:alice:rw-\ngroup::r--\nother::r--\n";
	char why[200];
	int res;

	set_map(100000);
	res = acl(gnu, bin, sizeof(bin), NULL, false, false, &out, &named, why);
	assert_true(res & SI_CHANGED);
	assert_string_equal((char *)out.p, "user::rwx\nuser:101000:rw-\ngroup::r--\nother::r--\n");
	assert_int_equal(named, 0);
	/* without the binary ACL a name stays a name, and is counted */
	res = acl(gnu, NULL, 0, NULL, false, false, &out, &named, why);
	assert_false(res & SI_CHANGED);
	assert_int_equal(named, 1);
	/* NFSv4, as libarchive writes it */
	gnu = "owner@:rwxp--aARWcCos:-------:allow,user:bob:rw-p--aARWc--s:-------:allow:1000";
	res = acl(gnu, NULL, 0, NULL, true, true, &out, &named, why);
	assert_true(res & SI_CHANGED);
	assert_string_equal((char *)out.p, "owner@:rwxp--aARWcCos:-------:allow,user:bob:rw-p--aARWc--s:-------:allow:101000");
	th_buf_free(&out);
}

/*
 * The binary ACL as a raw setxattr left it (uid 1000 rw-, then uid 0
 * r--); the text as libacl gives it (by id: root r--, then 1000 rw-).
 * Each name gets its own id, never its neighbour's.
 */
static void test_acl_text_out_of_order(void **state)
{
	struct th_buf out = { 0 };
	unsigned char bin[BIN_TWO];
	unsigned int named = 0;
	char why[200];
	int res;

	set_map(100000);
	bin_two(bin, 1000, 6, 0, 4);
	res = acl("user::rw-,user:root:r--,user:alice:rw-,group::r--,mask::rw-,other::r--",
		  bin, sizeof(bin), NULL, false, false, &out, &named, why);
	assert_true(res & SI_CHANGED);
	assert_string_equal((char *)out.p,
		"user::rw-,user:100000:r--,user:101000:rw-,group::r--,mask::rw-,other::r--");
	/* --names=keep: names stay, nothing is paired wrongly either way */
	res = acl("user:root:r--,user:alice:rw-", bin, sizeof(bin), NULL, false, true,
		  &out, &named, why);
	assert_string_equal((char *)out.p, "user:root:r--,user:alice:rw-");
	/* libarchive's form, ids given, in the binary's own order */
	res = acl("user:alice:rw-:1000,user:root:r--:0", bin, sizeof(bin), NULL, false,
		  false, &out, &named, why);
	assert_string_equal((char *)out.p, "user:101000:rw-:101000,user:100000:r--:100000");
	/* one name for two ids (two accounts sharing it): each its own */
	res = acl("user:x:r--,user:x:rw-", bin, sizeof(bin), NULL, false, false,
		  &out, &named, why);
	assert_string_equal((char *)out.p, "user:100000:r--,user:101000:rw-");
	th_buf_free(&out);
}

/* Every way the two can disagree is refused, and says which entry. */
static void test_acl_text_disagreements(void **state)
{
	struct th_acl_owner own = { { "root", "root" }, { 4, 4 }, { 0, 0 } };
	struct th_buf out = { 0 };
	unsigned char bin[BIN_TWO];
	unsigned int named = 0;
	char why[200];

	set_map(100000);
	bin_two(bin, 1000, 6, 0, 4);
	/* a text in the binary ACL's stored order pairs in that order */
	assert_true(acl("user:alice:rw-,user:root:r--", bin, sizeof(bin), NULL,
			false, false, &out, &named, why) & SI_CHANGED);
	assert_string_equal((char *)out.p, "user:101000:rw-,user:100000:r--");
	/* permissions that match neither order */
	assert_int_equal(acl("user:alice:r--,user:root:r--", bin, sizeof(bin), NULL,
			     false, false, &out, &named, why), -EPROTO);
	assert_non_null(strstr(why, "'user:root:r--' does not match"));
	/* a text entry more than the binary ACL holds, and one fewer */
	assert_int_equal(acl("user:root:r--,user:alice:rw-,user:bob:r--", bin, sizeof(bin),
			     NULL, false, false, &out, &named, why), -EPROTO);
	assert_non_null(strstr(why, "'user:bob:r--' has no counterpart"));
	assert_int_equal(acl("user:root:r--", bin, sizeof(bin), NULL, false, false,
			     &out, &named, why), -EPROTO);
	assert_non_null(strstr(why, "lacks the binary ACL's entry for uid 1000"));
	/* an id the binary ACL does not hold */
	assert_int_equal(acl("user:bob:r--:5,user:alice:rw-:1000", bin, sizeof(bin), NULL,
			     false, false, &out, &named, why), -EPROTO);
	assert_non_null(strstr(why, "no uid 5 there"));
	/* an id where position says another */
	assert_int_equal(acl("user:root:r--:7,user:alice:rw-", bin, sizeof(bin), NULL,
			     false, false, &out, &named, why), -EPROTO);
	/*
	 * The owner's own record says root is 0: where libacl's order
	 * pairs root with 1000, the stored order, which agrees, is taken;
	 * where both orders are one, it is refused.
	 */
	bin_two(bin, 1000, 4, 0, 4);
	assert_true(acl("user:alice:r--,user:root:r--", bin, sizeof(bin), &own,
			false, false, &out, &named, why) & SI_CHANGED);
	assert_string_equal((char *)out.p, "user:101000:r--,user:100000:r--");
	bin_two(bin, 0, 4, 1000, 4);
	assert_int_equal(acl("user:alice:r--,user:root:r--", bin, sizeof(bin), &own,
			     false, false, &out, &named, why), -EPROTO);
	assert_non_null(strstr(why, "whose record says 0"));
	/* two entries for one id in the binary ACL */
	bin_two(bin, 1000, 4, 1000, 6);
	assert_int_equal(acl("user:a:r--,user:b:rw-", bin, sizeof(bin), NULL, false, false,
			     &out, &named, why), -EPROTO);
	assert_non_null(strstr(why, "names uid 1000 twice"));
	/* a group entry the binary ACL lacks */
	bin_two(bin, 1000, 6, 0, 4);
	assert_int_equal(acl("user:root:r--,user:alice:rw-,group:staff:r--", bin, sizeof(bin),
			     NULL, false, false, &out, &named, why), -EPROTO);
	assert_non_null(strstr(why, "'group:staff:r--'"));
	/* malformed ids stay malformed */
	assert_int_equal(acl("user:99999999999:r--", NULL, 0, NULL, false, false, &out,
			     &named, why), -EBADMSG);
	th_buf_free(&out);
}

/* Old GNU sparse: extension blocks pass through, the header is shifted. */
static void test_gnu_sparse(void **state)
{
	struct arc a = { .len = 0 };
	unsigned char *h, *x;
	struct mem m;

	set_map(100000);
	h = blk(&a);
	hdr(h, "sparse", 'S', 0, 0, BLK, GNU);
	h[482] = 1;	/* an extension block follows */
	cksum(h);
	x = blk(&a);
	memset(x, '1', 504);
	data(&a, "data", 4);
	end(&a);
	assert_int_equal(run(&m, a.b, a.len, NULL), 0);
	assert_int_equal(m.out.len, a.len);
	assert_int_equal(field(m.out.p + 108, 8), 100000);
	assert_memory_equal(m.out.p + BLK, a.b + BLK, a.len - BLK);
	th_buf_free(&m.out);
}

/* star: a shorter prefix, then atime and ctime; only ids change. */
static void test_star(void **state)
{
	struct arc a = { .len = 0 };
	unsigned char *h;
	struct mem m;
	size_t i;

	set_map(100000);
	h = blk(&a);
	hdr(h, "name", '0', 5, 6, 0, USTAR);
	memset(h + 345, 'p', 131);
	oct(h + 476, 12, 1700000001);
	oct(h + 488, 12, 1700000002);
	memcpy(h + 508, "tar", 4);
	cksum(h);
	end(&a);
	assert_int_equal(run(&m, a.b, a.len, NULL), 0);
	assert_int_equal(m.out.len, a.len);
	assert_int_equal(field(m.out.p + 108, 8), 100005);
	assert_int_equal(field(m.out.p + 116, 8), 100006);
	assert_true(th_cksum_ok(m.out.p));
	for (i = 0; i < a.len; i++)
		if ((i < 108 || i >= 124) && (i < 148 || i >= 156) &&
		    (i < 265 || i >= 329))
			assert_int_equal(m.out.p[i], a.b[i]);
	th_buf_free(&m.out);
}

/* ---- bad input ---- */

static void expect_bad(const struct arc *a, const char *what)
{
	char err[512];
	struct mem m;

	assert_int_equal(run(&m, a->b, a->len, err), -EBADMSG);
	if (!strstr(err, what) || !strstr(err, "offset"))
		fail_msg("error \"%s\" does not say \"%s\" and the offset", err, what);
	th_buf_free(&m.out);
}

static void test_bad_checksum(void **state)
{
	struct arc a = { .len = 0 };
	unsigned char *h;

	set_map(100000);
	hdr(blk(&a), "ok", '0', 0, 0, 0, USTAR);
	h = blk(&a);
	hdr(h, "bad", '0', 0, 0, 0, USTAR);
	h[0] = 'B';
	end(&a);
	expect_bad(&a, "checksum");
}

static void test_truncated(void **state)
{
	struct arc a = { .len = 0 };

	set_map(100000);
	hdr(blk(&a), "big", '0', 0, 0, 5000, USTAR);
	data(&a, NULL, 1000);
	expect_bad(&a, "truncated");
	a.len = 0;
	hdr(blk(&a), "f", '0', 0, 0, 0, USTAR);
	expect_bad(&a, "no end-of-archive");
	a.len = 0;
	hdr(blk(&a), "f", '0', 0, 0, 0, USTAR);
	a.len -= 100;
	expect_bad(&a, "truncated header");
}

static void test_bad_pax(void **state)
{
	static const char *const bad[] = {
		"99999999999999999999 uid=1\n",	/* absurd length */
		"-5 uid=1\n",			/* negative */
		"3 uid=1\n",			/* too short */
		"12 uid=1000x",			/* no newline */
		"13 uid=-1000\n",		/* not an id */
		"10 =value\n",			/* no keyword */
		"22 uid=99999999999999\n",	/* past the largest id */
	};
	size_t i;

	set_map(100000);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct arc a = { .len = 0 };

		pax(&a, bad[i], 'x');
		hdr(blk(&a), "f", '0', 0, 0, 0, USTAR);
		end(&a);
		expect_bad(&a, "pax");
	}
}

static void test_bad_numbers(void **state)
{
	struct arc a = { .len = 0 };
	unsigned char *h;

	set_map(100000);
	h = blk(&a);
	hdr(h, "neg", '0', 0, 0, 0, GNU);
	memcpy(h + 108, "\xff\xff\xff\xff\xff\xff\xff\xfe", 8);
	cksum(h);
	end(&a);
	expect_bad(&a, "uid");
	a.len = 0;
	h = blk(&a);
	hdr(h, "huge", '0', 0, 0, 0, GNU);
	memcpy(h + 116, "\x80\0\0\x01\0\0\0\0", 8);	/* 2^32: past an id */
	cksum(h);
	end(&a);
	expect_bad(&a, "gid");
}

static void test_meta_limit(void **state)
{
	struct arc a = { .len = 0 };

	set_map(100000);
	hdr(blk(&a), "PaxHeader/f", 'x', 0, 0, TH_META_MAX + 1, USTAR);
	end(&a);
	expect_bad(&a, "limit");
}

static void test_trailer(void **state)
{
	struct arc a = { .len = 0 };

	set_map(100000);
	hdr(blk(&a), "f", '0', 0, 0, 0, USTAR);
	end(&a);
	/* zeros after the end are copied, anything else is refused */
	blk(&a);
	{
		struct mem m;

		assert_int_equal(run(&m, a.b, a.len, NULL), 0);
		assert_int_equal(m.out.len, a.len);
		th_buf_free(&m.out);
	}
	hdr(blk(&a), "hidden", '0', 0, 0, 0, USTAR);
	expect_bad(&a, "after the end-of-archive");
}

/* --unmapped=fail: nothing is written past the first unmapped id. */
static void test_unmapped_stops(void **state)
{
	struct arc a = { .len = 0 };
	struct mem m;

	set_map(100000);
	hdr(blk(&a), "ok", '0', 1, 1, 0, USTAR);
	hdr(blk(&a), "stray", '0', 70000, 1, 0, USTAR);
	hdr(blk(&a), "after", '0', 2, 2, 0, USTAR);
	end(&a);
	assert_int_equal(run(&m, a.b, a.len, NULL), -EOVERFLOW);
	assert_int_equal(m.out.len, BLK);
	assert_int_equal(tally.st.unmapped, 1);
	assert_int_equal(tally.st.objects, 3);
	th_buf_free(&m.out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_cksum),
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_shift_ustar),
		cmocka_unit_test(test_ustar_overflow_roundtrip),
		cmocka_unit_test(test_gnu_base256),
		cmocka_unit_test(test_pax_records),
		cmocka_unit_test(test_global),
		cmocka_unit_test(test_lxattr_urlname),
		cmocka_unit_test(test_acl_text),
		cmocka_unit_test(test_acl_text_out_of_order),
		cmocka_unit_test(test_acl_text_disagreements),
		cmocka_unit_test(test_gnu_sparse),
		cmocka_unit_test(test_star),
		cmocka_unit_test(test_bad_checksum),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_bad_pax),
		cmocka_unit_test(test_bad_numbers),
		cmocka_unit_test(test_meta_limit),
		cmocka_unit_test(test_trailer),
		cmocka_unit_test(test_unmapped_stops),
	};
	int ret = cmocka_run_group_tests(tests, NULL, NULL);

	si_tally_free(&tally);
	return ret;
}
