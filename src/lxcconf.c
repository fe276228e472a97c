// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * LXC's config format (lxc.container.conf(5)): one "key = value" per
 * line, blanks around both, "#" starts a comment line.  Only the keys
 * a migration must know are read; every line is kept as it was when the
 * config is written back, except the lxc.idmap lines being replaced.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lxcconf.h"

struct line {
	size_t start, end;		/* the line, its newline excluded */
	size_t key, key_len;
	size_t val, val_len;
	bool kv;			/* a "key = value" line */
};

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Splits the line starting at off; returns the offset of the next one. */
static size_t next_line(const char *buf, size_t len, size_t off,
			struct line *l)
{
	const char *nl = memchr(buf + off, '\n', len - off);
	size_t p, q;

	memset(l, 0, sizeof(*l));
	l->start = off;
	l->end = nl ? (size_t)(nl - buf) : len;
	for (p = l->start; p < l->end && blank(buf[p]); p++)
		;
	if (p == l->end || buf[p] == '#')
		return nl ? l->end + 1 : len;
	l->key = p;
	for (q = p; q < l->end && buf[q] != '=' && !blank(buf[q]); q++)
		;
	l->key_len = q - p;
	for (; q < l->end && blank(buf[q]); q++)
		;
	if (q < l->end && buf[q] == '=') {
		l->kv = true;
		for (q++; q < l->end && blank(buf[q]); q++)
			;
		l->val = q;
		for (p = l->end; p > q && blank(buf[p - 1]); p--)
			;
		l->val_len = p - q;
	}
	return nl ? l->end + 1 : len;
}

static bool key_is(const char *buf, const struct line *l, const char *key)
{
	return l->key_len == strlen(key) && !memcmp(buf + l->key, key, l->key_len);
}

/* "u 0 100000 65536": the kind (0 uid, 1 gid) and the triple. */
static int parse_idmap(const char *v, size_t n, int *kind, uint64_t t[3])
{
	char tmp[128], *p, *end;
	int i;

	if (n >= sizeof(tmp))
		return -1;
	memcpy(tmp, v, n);
	tmp[n] = '\0';
	if ((tmp[0] != 'u' && tmp[0] != 'g') || !blank(tmp[1]))
		return -1;
	*kind = tmp[0] == 'g';
	p = tmp + 1;
	for (i = 0; i < 3; i++) {
		while (blank(*p))
			p++;
		if (*p < '0' || *p > '9')
			return -1;
		errno = 0;
		t[i] = strtoull(p, &end, 10);
		if (errno || end == p)
			return -1;
		p = end;
	}
	while (blank(*p))
		p++;
	return *p ? -1 : 0;
}

static int line_idmap(const char *buf, const struct line *l,
		      struct si_lxc_conf *c, char *msg, size_t msgsize)
{
	char why[128];
	uint64_t t[3];
	int k;

	c->idmap_lines++;
	if (!l->val_len) {
		/* An empty value clears every range given before it. */
		c->map[0].nr = c->map[1].nr = 0;
		c->have_map[0] = c->have_map[1] = false;
		return 0;
	}
	if (parse_idmap(buf + l->val, l->val_len, &k, t) < 0) {
		snprintf(msg, msgsize, "lxc.idmap '%.*s': not 'u|g inside outside count'",
			 (int)l->val_len, buf + l->val);
		return -EINVAL;
	}
	if (si_idmap_add(&c->map[k], t[0], t[1], t[2], why, sizeof(why)) < 0) {
		snprintf(msg, msgsize, "lxc.idmap '%.*s': %s", (int)l->val_len,
			 buf + l->val, why);
		return -EINVAL;
	}
	c->have_map[k] = true;
	return 0;
}

static void line_rootfs(const char *buf, const struct line *l,
			struct si_lxc_conf *c)
{
	const char *v = buf + l->val;
	const char *colon = memchr(v, ':', l->val_len);
	size_t skip = 0;

	c->rootfs_kind = l->val_len ? SI_LXC_ROOTFS_DIR : SI_LXC_ROOTFS_NONE;
	c->rootfs_type = (struct si_lxc_span){ 0, 0 };
	/* A plain path starts with "/"; anything before a ':' is a type. */
	if (l->val_len && v[0] != '/' && colon) {
		skip = (size_t)(colon - v) + 1;
		c->rootfs_type = (struct si_lxc_span){ l->val, skip - 1 };
		if (skip == 4 && !memcmp(v, "dir", 3))
			c->rootfs_kind = SI_LXC_ROOTFS_DIR;
		else if (skip == 5 && !memcmp(v, "loop", 4))
			c->rootfs_kind = SI_LXC_ROOTFS_LOOP;
		else
			c->rootfs_kind = SI_LXC_ROOTFS_OTHER;
	}
	c->rootfs = (struct si_lxc_span){ l->val + skip, l->val_len - skip };
}

static int parse_line(const char *buf, const struct line *l,
		      struct si_lxc_conf *c, char *msg, size_t msgsize)
{
	if (l->key_len > 4 && !memcmp(buf + l->key, "lxc.", 4))
		c->lxc_keys = true;
	if (key_is(buf, l, "lxc.idmap"))
		return line_idmap(buf, l, c, msg, msgsize);
	if (key_is(buf, l, "lxc.id_map") || key_is(buf, l, "lxc.rootfs")) {
		snprintf(msg, msgsize, "%.*s is a key of LXC before 3.0: update the config with lxc-update-config",
			 (int)l->key_len, buf + l->key);
		return -EINVAL;
	}
	if (key_is(buf, l, "lxc.rootfs.path"))
		line_rootfs(buf, l, c);
	else if (key_is(buf, l, "lxc.mount.entry"))
		c->mount_entries++;
	else if (key_is(buf, l, "lxc.include") && l->val_len) {
		if (c->nr_include == SI_LXC_INCLUDES) {
			snprintf(msg, msgsize, "more than %d lxc.include lines",
				 SI_LXC_INCLUDES);
			return -EINVAL;
		}
		c->include[c->nr_include++] = (struct si_lxc_span){ l->val, l->val_len };
	}
	return 0;
}

int si_lxc_conf_parse(const char *buf, size_t len, struct si_lxc_conf *c,
		      char *msg, size_t msgsize)
{
	size_t off = 0;
	unsigned int lineno = 0;

	memset(c, 0, sizeof(*c));
	if (memchr(buf, '\0', len)) {
		snprintf(msg, msgsize, "a NUL byte: not a text file");
		return -EINVAL;
	}
	while (off < len) {
		struct line l;
		char why[384];
		int err;

		off = next_line(buf, len, off, &l);
		lineno++;
		if (!l.key_len)
			continue;
		if (!l.kv) {
			snprintf(msg, msgsize, "line %u: not 'key = value'", lineno);
			return -EINVAL;
		}
		err = parse_line(buf, &l, c, why, sizeof(why));
		if (err) {
			snprintf(msg, msgsize, "line %u: %s", lineno, why);
			return err;
		}
	}
	return 0;
}

/* ---- writing the config back ---- */

struct out {
	char *buf;
	size_t len, cap;
	bool failed;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->failed)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t cap = (o->len + n + 1) * 2;
		char *p = realloc(o->buf, cap);

		if (!p) {
			o->failed = true;
			return;
		}
		o->buf = p;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

static void put_map(struct out *o, const struct si_idmap map[2],
		    unsigned int kinds)
{
	char line[96];
	unsigned int k, i;

	for (k = 0; k < 2; k++) {
		if (!(kinds & (1u << k)))
			continue;
		for (i = 0; i < map[k].nr; i++) {
			const struct si_extent *e = &map[k].ext[i];
			int n = snprintf(line, sizeof(line),
					 "lxc.idmap = %c %" PRIu32 " %" PRIu32 " %" PRIu32 "\n",
					 k ? 'g' : 'u', e->first, e->target, e->count);

			put(o, line, (size_t)n);
		}
	}
}

/* Is this an lxc.idmap line of a kind being replaced (or a clearing one)? */
static bool replaced(const char *buf, const struct line *l, unsigned int kinds)
{
	int k;
	uint64_t t[3];

	if (!l->kv || !key_is(buf, l, "lxc.idmap"))
		return false;
	if (!l->val_len)
		return kinds == (SHIFTIMG_UID | SHIFTIMG_GID);
	if (parse_idmap(buf + l->val, l->val_len, &k, t) < 0)
		return false;
	return kinds & (1u << k);
}

/* Where the last "lxc.idmap =" starts: ranges before it do not count. */
static size_t last_clear(const char *buf, size_t len)
{
	size_t off = 0, at = 0;

	while (off < len) {
		struct line l;
		size_t next = next_line(buf, len, off, &l);

		if (l.kv && !l.val_len && key_is(buf, &l, "lxc.idmap"))
			at = off + 1;
		off = next;
	}
	return at;
}

char *si_lxc_conf_render(const char *buf, size_t len,
			 const struct si_idmap map[2], unsigned int kinds,
			 size_t *outlen)
{
	size_t off = 0, clear = last_clear(buf, len);
	struct out o = { 0 };
	bool placed = false;

	put(&o, "", 0);
	while (off < len) {
		struct line l;
		size_t next = next_line(buf, len, off, &l);

		if (replaced(buf, &l, kinds)) {
			/* Not before a clearing line that is kept: it would clear them. */
			if (!placed && off + 1 > clear) {
				put_map(&o, map, kinds);
				placed = true;
			}
		} else {
			put(&o, buf + off, next - off);
		}
		off = next;
	}
	if (!placed) {
		if (o.len && o.buf[o.len - 1] != '\n')
			put(&o, "\n", 1);
		put_map(&o, map, kinds);
	}
	if (o.failed) {
		free(o.buf);
		return NULL;
	}
	*outlen = o.len;
	return o.buf;
}
