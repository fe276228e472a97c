// SPDX-License-Identifier: LGPL-2.1-or-later
/* JSON spans and splices for OCI metadata (ocijson.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocijson.h"

/* Image metadata nests a few levels; a bound keeps the stack small. */
#define MAX_DEPTH	64

static size_t skip_ws(const char *b, size_t n, size_t p)
{
	while (p < n && (b[p] == ' ' || b[p] == '\t' || b[p] == '\n' ||
			 b[p] == '\r'))
		p++;
	return p;
}

static int skip_string(const char *b, size_t n, size_t *pos)
{
	size_t p = *pos + 1;

	while (p < n && b[p] != '"') {
		if ((unsigned char)b[p] < 0x20)
			return -1;
		p += b[p] == '\\' ? 2 : 1;
	}
	if (p >= n)
		return -1;
	*pos = p + 1;
	return 0;
}

static int skip_scalar(const char *b, size_t n, size_t *pos)
{
	static const char *const words[] = { "true", "false", "null" };
	size_t p = *pos, i;

	for (i = 0; i < 3; i++) {
		size_t l = strlen(words[i]);

		if (n - p >= l && !memcmp(b + p, words[i], l)) {
			*pos = p + l;
			return 0;
		}
	}
	if (b[p] == '-')
		p++;
	if (p >= n || b[p] < '0' || b[p] > '9')
		return -1;
	while (p < n && strchr("0123456789.eE+-", b[p]))
		p++;
	*pos = p;
	return 0;
}

static int skip_value(const char *b, size_t n, size_t *pos, int depth);

/* An object or array: members (or elements) between commas. */
static int skip_compound(const char *b, size_t n, size_t *pos, int depth)
{
	char close = b[*pos] == '{' ? '}' : ']';
	size_t p = skip_ws(b, n, *pos + 1);
	bool first = true;

	if (depth > MAX_DEPTH)
		return -1;
	while (p < n && b[p] != close) {
		if (!first && b[p++] != ',')
			return -1;
		p = skip_ws(b, n, p);
		if (close == '}') {
			if (p >= n || b[p] != '"' || skip_string(b, n, &p) < 0)
				return -1;
			p = skip_ws(b, n, p);
			if (p >= n || b[p++] != ':')
				return -1;
		}
		if (skip_value(b, n, &p, depth + 1) < 0)
			return -1;
		p = skip_ws(b, n, p);
		first = false;
	}
	if (p >= n)
		return -1;
	*pos = p + 1;
	return 0;
}

static int skip_value(const char *b, size_t n, size_t *pos, int depth)
{
	size_t p = skip_ws(b, n, *pos);

	if (p >= n)
		return -1;
	*pos = p;
	if (b[p] == '{' || b[p] == '[')
		return skip_compound(b, n, pos, depth);
	if (b[p] == '"')
		return skip_string(b, n, pos);
	return skip_scalar(b, n, pos);
}

int si_json_value(const char *b, size_t n, size_t *pos, struct si_json_span *v)
{
	size_t p = skip_ws(b, n, *pos);

	*pos = p;
	if (skip_value(b, n, pos, 0) < 0)
		return -1;
	v->off = p;
	v->len = *pos - p;
	return 0;
}

int si_json_doc(const char *b, size_t n, struct si_json_span *v)
{
	size_t p = 0;

	if (si_json_value(b, n, &p, v) < 0)
		return -1;
	return skip_ws(b, n, p) == n ? 0 : -1;
}

bool si_json_is(const char *b, struct si_json_span v, char type)
{
	return v.len && b[v.off] == type;
}

/*
 * The item at *iter (an offset inside the compound, 0 for its start):
 * its key (objects only), its value, and where it starts (its key).
 */
static int next_item(const char *b, struct si_json_span c, size_t *iter,
		     struct si_json_span *key, struct si_json_span *val,
		     size_t *start)
{
	size_t end = c.off + c.len - 1, p;
	bool obj = b[c.off] == '{';

	p = *iter ? *iter : c.off + 1;
	p = skip_ws(b, end, p);
	if (p < end && b[p] == ',' && *iter)
		p = skip_ws(b, end, p + 1);
	if (p >= end)
		return 0;
	*start = p;
	if (obj) {
		if (si_json_value(b, end, &p, key) < 0 || !si_json_is(b, *key, '"'))
			return -1;
		p = skip_ws(b, end, p);
		if (p >= end || b[p++] != ':')
			return -1;
	}
	if (si_json_value(b, end, &p, val) < 0)
		return -1;
	*iter = p;
	return 1;
}

int si_json_elem(const char *b, struct si_json_span arr, size_t *iter,
		 struct si_json_span *elem)
{
	size_t start;

	if (!si_json_is(b, arr, '['))
		return -1;
	return next_item(b, arr, iter, NULL, elem, &start);
}

int si_json_next_member(const char *b, struct si_json_span obj, size_t *iter,
			struct si_json_span *key, struct si_json_span *val)
{
	size_t start;

	if (!si_json_is(b, obj, '{'))
		return -1;
	return next_item(b, obj, iter, key, val, &start);
}

/*
 * A run of items to cut: after an item that stays, from the end of it
 * (its comma goes) to the end of the run, so the next item keeps its
 * indentation; at the start, from the first item to the next that
 * stays; everything: the inside of the brackets.
 */
int si_json_cut_items(const char *b, struct si_json_span c, const bool *drop,
		      size_t nr, struct si_json_edits *l)
{
	size_t iter = 0, i = 0, start, prev_end = 0, from = 0, to = 0;
	bool in_run = false, any_kept = false;
	struct si_json_span k, v;
	int r;

	if (!si_json_is(b, c, '{') && !si_json_is(b, c, '['))
		return -1;
	while ((r = next_item(b, c, &iter, &k, &v, &start)) > 0) {
		if (i < nr && drop[i]) {
			if (!in_run)
				from = any_kept ? prev_end : start;
			in_run = true;
			to = v.off + v.len;
		} else {
			/* A run at the start goes up to the first item that stays. */
			if (in_run && si_json_edit_add(l, from, (any_kept ? to : start) - from, "") < 0)
				return -1;
			in_run = false;
			any_kept = true;
			prev_end = v.off + v.len;
		}
		i++;
	}
	if (r < 0)
		return -1;
	if (in_run && !any_kept) {
		from = c.off + 1;
		to = c.off + c.len - 1;
	}
	if (in_run && si_json_edit_add(l, from, to - from, "") < 0)
		return -1;
	return 0;
}

int si_json_member(const char *b, struct si_json_span obj, const char *key,
		   struct si_json_span *val, size_t *index)
{
	size_t iter = 0, kl = strlen(key), i = 0;
	struct si_json_span k;
	int r;

	while ((r = si_json_next_member(b, obj, &iter, &k, val)) > 0) {
		if (k.len == kl + 2 && !memcmp(b + k.off + 1, key, kl)) {
			if (index)
				*index = i;
			return 1;
		}
		i++;
	}
	return r;
}

/* Cuts item i of c. */
static int cut_one(const char *b, struct si_json_span c, size_t i,
		   struct si_json_edits *l)
{
	bool *drop = calloc(i + 1, sizeof(*drop));
	int r;

	if (!drop)
		return -1;
	drop[i] = true;
	r = si_json_cut_items(b, c, drop, i + 1, l);
	free(drop);
	return r;
}

int si_json_str(const char *b, struct si_json_span v, char *out, size_t size)
{
	if (!si_json_is(b, v, '"') || v.len < 2 || v.len - 2 >= size ||
	    memchr(b + v.off + 1, '\\', v.len - 2))
		return -1;
	memcpy(out, b + v.off + 1, v.len - 2);
	out[v.len - 2] = '\0';
	return 0;
}

int si_json_u64(const char *b, struct si_json_span v, uint64_t *out)
{
	uint64_t x = 0;
	size_t i;

	if (!v.len || v.len > 19)
		return -1;
	for (i = 0; i < v.len; i++) {
		if (b[v.off + i] < '0' || b[v.off + i] > '9')
			return -1;
		x = x * 10 + (uint64_t)(b[v.off + i] - '0');
	}
	*out = x;
	return 0;
}

/* ---- splices ---- */

int si_json_edit_add(struct si_json_edits *l, size_t off, size_t len,
		     const char *text)
{
	char *t = strdup(text);

	if (!t)
		return -1;
	if (l->nr == l->alloc) {
		size_t na = l->alloc ? l->alloc * 2 : 16;
		struct si_json_edit *e = realloc(l->e, na * sizeof(*e));

		if (!e) {
			free(t);
			return -1;
		}
		l->e = e;
		l->alloc = na;
	}
	l->e[l->nr++] = (struct si_json_edit){ off, len, t };
	return 0;
}

void si_json_edits_free(struct si_json_edits *l)
{
	size_t i;

	for (i = 0; i < l->nr; i++)
		free(l->e[i].text);
	free(l->e);
	memset(l, 0, sizeof(*l));
}

/* By offset; at one offset insertions (len 0) first, then the wider cut. */
static int edit_cmp(const void *a, const void *b)
{
	const struct si_json_edit *x = a, *y = b;

	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return 0;
}

int si_json_splice(const char *b, size_t n, struct si_json_edits *l,
		   char **out, size_t *outlen)
{
	size_t i, size = n + 1, p = 0, o = 0;
	char *buf;

	if (l->nr)
		qsort(l->e, l->nr, sizeof(*l->e), edit_cmp);
	for (i = 0; i < l->nr; i++)
		size += strlen(l->e[i].text);
	buf = malloc(size);
	if (!buf)
		return -1;
	for (i = 0; i < l->nr; i++) {
		const struct si_json_edit *e = &l->e[i];
		size_t tl = strlen(e->text);

		if (e->off + e->len > n)
			goto out_free;
		if (e->off < p) {
			/* Inside what an earlier edit replaced: it went with it. */
			if (e->off + e->len <= p)
				continue;
			goto out_free;
		}
		memcpy(buf + o, b + p, e->off - p);
		o += e->off - p;
		memcpy(buf + o, e->text, tl);
		o += tl;
		p = e->off + e->len;
	}
	memcpy(buf + o, b + p, n - p);
	o += n - p;
	buf[o] = '\0';
	*out = buf;
	*outlen = o;
	return 0;
out_free:
	free(buf);
	return -1;
}

/* "key":"value" with the key and value quoted (both plain strings). */
static char *pair(const char *key, const char *value)
{
	size_t l = strlen(key) + strlen(value) + 6;
	char *s = malloc(l);

	if (s)
		snprintf(s, l, "\"%s\":\"%s\"", key, value);
	return s;
}

/* Splices pre, s, post at off (over len bytes). */
static int add_owned(struct si_json_edits *l, size_t off, size_t len,
		     const char *pre, const char *s, const char *post)
{
	size_t sz = strlen(pre) + strlen(s) + strlen(post) + 1;
	char *t = malloc(sz);
	int r;

	if (!t)
		return -1;
	snprintf(t, sz, "%s%s%s", pre, s, post);
	r = si_json_edit_add(l, off, len, t);
	free(t);
	return r;
}

static int remove_annotation(const char *b, struct si_json_span obj,
			     struct si_json_span ann, size_t ann_index,
			     const char *key, struct si_json_edits *l)
{
	struct si_json_span v, k;
	size_t iter = 0, at;
	int count = 0, r;

	r = si_json_member(b, ann, key, &v, &at);
	if (r <= 0)
		return r;
	while (si_json_next_member(b, ann, &iter, &k, &v) > 0)
		count++;
	if (count == 1)
		return cut_one(b, obj, ann_index, l);
	return cut_one(b, ann, at, l);
}

int si_json_set_annotation(const char *b, struct si_json_span obj,
			   const char *key, const char *value,
			   struct si_json_edits *l)
{
	struct si_json_span ann, v;
	size_t ann_index;
	char *kv;
	int r;

	r = si_json_member(b, obj, "annotations", &ann, &ann_index);
	if (r < 0 || (r > 0 && !si_json_is(b, ann, '{')))
		return -1;
	if (!value)
		return r ? remove_annotation(b, obj, ann, ann_index, key, l) : 0;
	if (r && si_json_member(b, ann, key, &v, NULL) > 0)
		return add_owned(l, v.off, v.len, "\"", value, "\"");
	kv = pair(key, value);
	if (!kv)
		return -1;
	if (r) {
		/*
		 * First in the object, before the first member (so a cut of
		 * it, up to the next member, gives back the bytes there were).
		 */
		size_t first = skip_ws(b, ann.off + ann.len - 1, ann.off + 1);
		bool empty = first == ann.off + ann.len - 1;

		r = add_owned(l, empty ? ann.off + 1 : first, 0, "", kv,
			      empty ? "" : ",");
	} else {
		/* Last in the object, after its last value. */
		size_t end = obj.off + obj.len - 1, q = end;
		bool empty;

		while (q > obj.off + 1 && strchr(" \t\r\n", b[q - 1]))
			q--;
		empty = q == obj.off + 1;
		r = add_owned(l, q, 0, empty ? "\"annotations\":{" :
				       ",\"annotations\":{", kv, "}");
	}
	free(kv);
	return r;
}
