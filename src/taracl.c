// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Text ACLs in pax records: SCHILY.acl.access and SCHILY.acl.default
 * (POSIX.1e, "tag:qualifier:perms[:id]"), SCHILY.acl.ace (NFSv4,
 * "tag:qualifier:perms:flags:type[:id]").
 *
 * libarchive appends each entry's id, and the id is what is shifted.
 * GNU tar writes what libacl's acl_to_text() gives: names only, in
 * libacl's order (by tag, then by id), beside the binary ACL as the
 * file held it (SCHILY.xattr.system.posix_acl_*), in whatever order the
 * writer of the xattr chose.  So, per tag: an entry with an id claims
 * the binary entry with that id; the entries with only a name are
 * paired with the binary entries left, in libacl's order (or, failing
 * that, in their stored order), and every pair must agree: as many
 * entries on both sides, the same permissions, and the id of the
 * entry's owner where the name is the owner's (uname, gname).  Names
 * kept by --names=keep after a shift need no id: for them the two sides
 * need only hold the same permissions.  Anything else is refused,
 * naming the entry: a wrong pairing would give one user another's
 * permissions.  Without a binary ACL, a name stays a name (counted in
 * *named), for the extracting host to resolve.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tarhdr.h"

/* The VFS format: a 4-byte header (version 2), then 8-byte entries. */
#define ACL_VERSION	2
#define TAG_USER	0x02
#define TAG_GROUP	0x08

struct bin_ent {
	uint32_t id;
	uint16_t perm;
	bool claimed;
};

/* The named entries of a binary ACL, per kind: stored order, and sorted. */
struct bin_acl {
	struct bin_ent *stored[2], *sorted[2];
	size_t n[2];
};

static int cmp_ent(const void *a, const void *b)
{
	const struct bin_ent *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void bin_free(struct bin_acl *b)
{
	int k;

	for (k = 0; k < 2; k++) {
		free(b->stored[k]);
		free(b->sorted[k]);
	}
	memset(b, 0, sizeof(*b));
}

/* 0, -ENOENT (no usable binary ACL), -ENOMEM, or -EPROTO with why. */
static int bin_load(const unsigned char *bin, size_t len, struct bin_acl *b,
		    char *why, size_t whylen)
{
	size_t off, i, cap = len >= 4 ? (len - 4) / 8 : 0;
	int k;

	memset(b, 0, sizeof(*b));
	if (!bin || len < 4 || (len - 4) % 8 || le32(bin) != ACL_VERSION)
		return -ENOENT;
	for (k = 0; k < 2; k++) {
		b->stored[k] = calloc(cap ? cap : 1, sizeof(struct bin_ent));
		b->sorted[k] = calloc(cap ? cap : 1, sizeof(struct bin_ent));
		if (!b->stored[k] || !b->sorted[k]) {
			bin_free(b);
			return -ENOMEM;
		}
	}
	for (off = 4; off < len; off += 8) {
		unsigned int tag = bin[off] | bin[off + 1] << 8;

		if (tag != TAG_USER && tag != TAG_GROUP)
			continue;
		k = tag == TAG_GROUP;
		b->stored[k][b->n[k]++] = (struct bin_ent){ le32(bin + off + 4),
			(uint16_t)((bin[off + 2] | bin[off + 3] << 8) & 7), false };
	}
	for (k = 0; k < 2; k++) {
		memcpy(b->sorted[k], b->stored[k], b->n[k] * sizeof(struct bin_ent));
		qsort(b->sorted[k], b->n[k], sizeof(struct bin_ent), cmp_ent);
		for (i = 1; i < b->n[k]; i++)
			if (b->sorted[k][i].id == b->sorted[k][i - 1].id) {
				snprintf(why, whylen, "the binary ACL names %s %u twice",
					 k ? "gid" : "uid", b->sorted[k][i].id);
				bin_free(b);
				return -EPROTO;
			}
	}
	return 0;
}

/* ---- one text entry ---- */

struct acl_field {
	const char *p;
	size_t n;
};

#define ACL_FIELDS	8

/* Splits an entry on ':'; a ninth field and beyond stay in the eighth. */
static size_t acl_split(const char *e, size_t n, struct acl_field *f)
{
	size_t nf = 0, i, s = 0;

	for (i = 0; i <= n && nf < ACL_FIELDS; i++) {
		if (i == n || e[i] == ':') {
			f[nf].p = e + s;
			f[nf++].n = i - s;
			s = i + 1;
		}
	}
	if (i <= n)
		f[ACL_FIELDS - 1].n = (size_t)(e + n - f[ACL_FIELDS - 1].p);
	return nf;
}

static bool field_is(const struct acl_field *f, const char *word)
{
	return (f->n == strlen(word) && !memcmp(f->p, word, f->n)) ||
	       (f->n == 1 && f->p[0] == word[0]);
}

static bool all_digits(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return n > 0;
}

/* The length of the leading digits of a field. */
static size_t digits_len(const struct acl_field *f)
{
	size_t k = 0;

	while (k < f->n && f->p[k] >= '0' && f->p[k] <= '9')
		k++;
	return k;
}

/* What an entry is, once split. */
struct acl_entry {
	struct acl_field f[ACL_FIELDS];
	size_t nf;
	size_t base;		/* index of the tag: 1 after "default:" */
	size_t idf;		/* index of the id field, nf if none */
	struct acl_field tail;	/* after the id's digits (a comment) */
	enum si_kind kind;
	bool qualified;		/* a named user or group */
};

static void acl_parse(const char *e, size_t n, bool nfs4, struct acl_entry *a)
{
	struct acl_field *f = a->f;

	memset(a, 0, sizeof(*a));
	a->nf = acl_split(e, n, f);
	a->idf = a->nf;
	a->base = a->nf > 3 && field_is(&f[0], "default") ? 1 : 0;
	if (a->nf < a->base + 2 || f[a->base + 1].n == 0)
		return;	/* too short, or the owner's own entry */
	if (field_is(&f[a->base], "user"))
		a->kind = SI_KUID;
	else if (field_is(&f[a->base], "group"))
		a->kind = SI_KGID;
	else
		return;
	a->qualified = true;
	/* libarchive appends the id: POSIX.1e 4th field, NFSv4 6th. */
	a->idf = a->base + (nfs4 ? 5 : 3);
	if (a->idf < a->nf && !nfs4 && digits_len(&f[a->idf]) == 0)
		a->idf = a->nf;	/* a comment, not an id ("#effective:r-x") */
	if (a->idf < a->nf) {
		size_t k = digits_len(&f[a->idf]);

		a->tail.p = f[a->idf].p + k;
		a->tail.n = f[a->idf].n - k;
		f[a->idf].n = k;
	} else {
		a->idf = a->nf;
	}
}

/* The id the entry gives itself (its id field, or a numeric qualifier). */
static bool own_id(const struct acl_entry *a, uint32_t *id)
{
	const struct acl_field *q = &a->f[a->base + 1];
	uint64_t v;

	if (a->idf < a->nf)
		q = &a->f[a->idf];
	else if (!all_digits(q->p, q->n))
		return false;
	if (!th_dec_get(q->p, q->n, SI_ID_MAX, &v))
		return false;
	*id = (uint32_t)v;
	return true;
}

/* "rw-", "r-x", "rw" (abbreviated): the rwx bits, or -1. */
static int perm_bits(const struct acl_field *f)
{
	int bits = 0;
	size_t i;

	for (i = 0; i < f->n; i++) {
		switch (f->p[i]) {
		case 'r': bits |= 4; break;
		case 'w': bits |= 2; break;
		case 'x': bits |= 1; break;
		case '-': break;
		default: return -1;
		}
	}
	return bits;
}

/* ---- the whole text ---- */

struct text_ent {
	const char *p;
	size_t n;
	struct acl_entry a;
	bool has_id;		/* the id below is known */
	uint32_t id;
};

struct acl_ctx {
	const struct th_acl_in *in;
	struct text_ent *e;
	size_t nr;
	struct bin_acl bin;
	bool have_bin;
	char *why;
	size_t whylen;
};

static int disagree(struct acl_ctx *c, const struct text_ent *t, const char *what)
{
	snprintf(c->why, c->whylen, "text ACL entry '%.*s' %s",
		 (int)(t->n > 64 ? 64 : t->n), t->p, what);
	return -EPROTO;
}

static const char *kind_id(enum si_kind k)
{
	return k ? "gid" : "uid";
}

static int perm_of(const struct text_ent *t)
{
	const struct acl_entry *a = &t->a;

	return a->base + 2 < a->nf ? perm_bits(&a->f[a->base + 2]) : -1;
}

/* Splits the text into entries, each parsed. */
static int split_text(struct acl_ctx *c)
{
	const struct th_acl_in *in = c->in;
	size_t s = 0, i, cap = 1;

	for (i = 0; i < in->len; i++)
		cap += in->text[i] == ',' || in->text[i] == '\n';
	c->e = calloc(cap, sizeof(*c->e));
	if (!c->e)
		return -ENOMEM;
	for (i = 0; i <= in->len; i++) {
		struct text_ent *t;
		const struct acl_field *q;

		if (i < in->len && in->text[i] != ',' && in->text[i] != '\n')
			continue;
		t = &c->e[c->nr++];
		t->p = in->text + s;
		t->n = i - s;
		acl_parse(t->p, t->n, in->nfs4, &t->a);
		s = i + 1;
		if (!t->a.qualified)
			continue;
		q = &t->a.f[t->a.base + 1];
		t->has_id = own_id(&t->a, &t->id);
		if (!t->has_id && (t->a.idf < t->a.nf || all_digits(q->p, q->n)))
			return -EBADMSG;
	}
	return 0;
}

/* Entries with an id claim the binary entry with that id. */
static int claim_numbered(struct acl_ctx *c, enum si_kind k)
{
	char what[160];
	size_t i;

	for (i = 0; i < c->nr; i++) {
		struct text_ent *t = &c->e[i];
		struct bin_ent key = { t->id, 0, false }, *b;
		int perm = perm_of(t);

		if (!t->a.qualified || t->a.kind != k || !t->has_id)
			continue;
		b = bsearch(&key, c->bin.sorted[k], c->bin.n[k], sizeof(key), cmp_ent);
		if (!b)
			snprintf(what, sizeof(what), "has no counterpart in the binary ACL (no %s %u there)",
				 kind_id(k), t->id);
		else if (b->claimed)
			snprintf(what, sizeof(what), "names %s %u a second time", kind_id(k), t->id);
		else if (perm >= 0 && perm != b->perm)
			snprintf(what, sizeof(what), "does not match the binary ACL's entry for %s %u (permissions %o)",
				 kind_id(k), t->id, b->perm);
		else
			what[0] = '\0';
		if (what[0])
			return disagree(c, t, what);
		b->claimed = true;
	}
	return 0;
}

/*
 * The name-only entries, in text order, against the unclaimed binary
 * entries of list (sorted or stored), in its order: 0 if every pair
 * agrees (and then *ids are set when set_ids), -EPROTO with why if not.
 */
static int try_pairing(struct acl_ctx *c, enum si_kind k, const struct bin_ent *list,
		       bool set_ids)
{
	const struct th_acl_owner *o = c->in->owner;
	size_t i, j = 0, n = c->bin.n[k];
	char what[160];

	for (i = 0; i < c->nr; i++) {
		struct text_ent *t = &c->e[i];
		const struct acl_field *name = &t->a.f[t->a.base + 1];
		int perm = perm_of(t);

		if (!t->a.qualified || t->a.kind != k || t->has_id)
			continue;
		while (j < n && list[j].claimed)
			j++;
		if (j == n)
			snprintf(what, sizeof(what), "has no counterpart in the binary ACL (it has %zu named %s entries)",
				 n, k ? "group" : "user");
		else if (perm >= 0 && perm != list[j].perm)
			snprintf(what, sizeof(what), "does not match the binary ACL's entry it pairs with in libacl's order (%s %u, permissions %o)",
				 kind_id(k), list[j].id, list[j].perm);
		else if (o && o->len[k] == name->n && name->n &&
			 !memcmp(o->name[k], name->p, name->n) && o->id[k] != list[j].id)
			snprintf(what, sizeof(what), "names the entry's %s, whose record says %u, where the binary ACL has %u",
				 k ? "group" : "owner", o->id[k], list[j].id);
		else
			what[0] = '\0';
		if (what[0])
			return disagree(c, t, what);
		if (set_ids)
			t->id = list[j].id;
		j++;
	}
	while (j < n && list[j].claimed)
		j++;
	if (j < n) {
		snprintf(c->why, c->whylen, "%s lacks the binary ACL's entry for %s %u",
			 c->in->key ? c->in->key : "the text ACL", kind_id(k), list[j].id);
		return -EPROTO;
	}
	return 0;
}

/* Kept names need no id, only the same permissions on both sides. */
static bool same_perms(const struct acl_ctx *c, enum si_kind k)
{
	unsigned int have[8] = { 0 }, want[8] = { 0 };
	size_t i;

	for (i = 0; i < c->nr; i++) {
		const struct text_ent *t = &c->e[i];

		if (t->a.qualified && t->a.kind == k && !t->has_id)
			have[perm_of(t) & 7]++;
	}
	for (i = 0; i < c->bin.n[k]; i++)
		if (!c->bin.sorted[k][i].claimed)
			want[c->bin.sorted[k][i].perm]++;
	return !memcmp(have, want, sizeof(have));
}

static void mark_named(struct acl_ctx *c, enum si_kind k)
{
	size_t i;

	for (i = 0; i < c->nr; i++)
		if (c->e[i].a.qualified && c->e[i].a.kind == k && !c->e[i].has_id)
			c->e[i].has_id = true;
}

static int pair_kind(struct acl_ctx *c, enum si_kind k)
{
	struct bin_ent *stored = c->bin.stored[k];
	char first[256];
	size_t i;
	int err = claim_numbered(c, k);

	if (err)
		return err;
	/* The stored list learns what the sorted one had claimed. */
	for (i = 0; i < c->bin.n[k]; i++) {
		struct bin_ent *b = bsearch(&stored[i], c->bin.sorted[k], c->bin.n[k],
					    sizeof(*b), cmp_ent);

		stored[i].claimed = b->claimed;
	}
	err = try_pairing(c, k, c->bin.sorted[k], false);
	if (!err) {
		try_pairing(c, k, c->bin.sorted[k], true);
		mark_named(c, k);
		return 0;
	}
	snprintf(first, sizeof(first), "%s", c->why);
	if (try_pairing(c, k, stored, false) == 0) {
		try_pairing(c, k, stored, true);
		mark_named(c, k);
		return 0;
	}
	if (c->in->keep_names && same_perms(c, k))
		return 0;	/* the names stay; no id is needed */
	snprintf(c->why, c->whylen, "%s", first);
	return -EPROTO;
}

static int acl_join(struct th_buf *out, const struct acl_entry *a)
{
	size_t i;

	for (i = 0; i < a->nf; i++) {
		if ((i && th_buf_add(out, ":", 1)) || th_buf_add(out, a->f[i].p, a->f[i].n))
			return -ENOMEM;
		if (i == a->idf && th_buf_add(out, a->tail.p, a->tail.n))
			return -ENOMEM;
	}
	return 0;
}

static void set_num(struct acl_field *f, char *num, uint32_t v)
{
	snprintf(num, 12, "%u", v);
	f->p = num;
	f->n = strlen(num);
}

static int entry_out(struct acl_ctx *c, struct text_ent *t, unsigned int *named,
		     struct si_tally *tally, struct th_buf *out)
{
	struct acl_entry *a = &t->a;
	struct acl_field *name = &a->f[a->base + 1];
	bool by_number = all_digits(name->p, name->n);
	char num1[12], num2[12];
	uint32_t to;
	int res;

	if (!a->qualified || !t->has_id) {
		if (a->qualified && !c->have_bin)
			(*named)++;	/* nothing says which id: the name stays */
		return th_buf_add(out, t->p, t->n) ? -ENOMEM : 0;
	}
	res = si_shift_id(c->in->rules, a->kind, t->id, &to, tally);
	if (res & SI_CHANGED) {
		if (a->idf < a->nf)
			set_num(&a->f[a->idf], num1, to);
		/* A name would be resolved on extraction: the new id goes there. */
		if (by_number || !c->in->keep_names)
			set_num(name, num2, to);
	}
	return acl_join(out, a) ? -ENOMEM : res;
}

int th_acl_text(const struct th_acl_in *in, struct th_buf *out,
		unsigned int *named, struct si_tally *t, char *why, size_t whylen)
{
	struct acl_ctx c = { .in = in, .why = why, .whylen = whylen };
	size_t i;
	int res = 0, err;

	err = split_text(&c);
	if (err)
		goto out_free;
	err = bin_load(in->bin, in->binlen, &c.bin, why, whylen);
	if (err == -ENOMEM || err == -EPROTO)
		goto out_free;
	c.have_bin = err == 0;
	err = c.have_bin ? pair_kind(&c, SI_KUID) : 0;
	if (!err && c.have_bin)
		err = pair_kind(&c, SI_KGID);
	for (i = 0; !err && i < c.nr; i++) {
		int r2 = entry_out(&c, &c.e[i], named, t, out);

		if (r2 < 0)
			err = r2;
		else
			res |= r2;
		/* The separator as it was. */
		if (!err && i + 1 < c.nr && th_buf_add(out, c.e[i].p + c.e[i].n, 1))
			err = -ENOMEM;
	}
out_free:
	bin_free(&c.bin);
	free(c.e);
	return err < 0 ? err : res;
}
