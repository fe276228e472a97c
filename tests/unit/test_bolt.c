// SPDX-License-Identifier: GPL-2.0-or-later
/* bolt files read and written again (src/bolt.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bolt.h"
#include "le.h"

/* Keys and values live here for the tree built by hand. */
static char pool[1 << 22];
static size_t used;

static unsigned char *keep(const void *p, size_t n)
{
	unsigned char *q = (unsigned char *)pool + used;

	assert_true(used + n <= sizeof(pool));
	memcpy(q, p, n);
	used += n;
	return q;
}

static struct si_bolt_item *add(struct si_bolt_bucket *bk, const char *key,
				const void *val, size_t vlen)
{
	struct si_bolt_item *it;

	if (bk->nr == bk->cap) {
		bk->cap = bk->cap ? 2 * bk->cap : 8;
		bk->items = realloc(bk->items, bk->cap * sizeof(*it));
		assert_non_null(bk->items);
	}
	it = &bk->items[bk->nr++];
	memset(it, 0, sizeof(*it));
	it->key = keep(key, strlen(key));
	it->klen = (uint32_t)strlen(key);
	if (val) {
		it->val = keep(val, vlen);
		it->vlen = (uint32_t)vlen;
	} else {
		it->sub = calloc(1, sizeof(*it->sub));
		assert_non_null(it->sub);
	}
	return it;
}

/*
 * A tree like libpod's, with every shape bolt has: inline buckets,
 * empty ones, a bucket of many keys (branch pages), a value longer than
 * a page (overflow pages), buckets three deep.
 */
static void build(struct si_bolt *db)
{
	static char big[20000];
	struct si_bolt_item *ctr, *c1, *many, *deep;
	char k[32], v[64];
	int i;

	memset(db, 0, sizeof(*db));
	db->page_size = 4096;
	db->txid = 41;
	for (i = 0; i < (int)sizeof(big); i++)
		big[i] = (char)('a' + i % 26);
	add(&db->root, "all-ctrs", NULL, 0);
	add(db->root.items[0].sub, "c1", "name", 4);
	add(&db->root, "allPods", NULL, 0);
	ctr = add(&db->root, "ctr", NULL, 0);
	c1 = add(ctr->sub, "c1", NULL, 0);
	add(c1->sub, "config", big, sizeof(big));
	deep = add(c1->sub, "dependencies", NULL, 0);
	add(deep->sub, "x", NULL, 0)->sub->seq = 7;
	add(c1->sub, "state", "{\"state\":1}", 11);
	many = add(&db->root, "many", NULL, 0);
	many->sub->seq = 3;
	for (i = 0; i < 3000; i++) {
		snprintf(k, sizeof(k), "key-%06d", i);
		snprintf(v, sizeof(v), "value %d", i * 7);
		add(many->sub, k, v, strlen(v));
	}
	add(&db->root, "runtime-config", NULL, 0);
	add(db->root.items[db->root.nr - 1].sub, "graph-root", "/var/lib/containers/storage", 27);
}

static void same_bucket(const struct si_bolt_bucket *a, const struct si_bolt_bucket *b)
{
	size_t i;

	assert_int_equal(a->nr, b->nr);
	assert_int_equal(a->seq, b->seq);
	for (i = 0; i < a->nr; i++) {
		assert_int_equal(a->items[i].klen, b->items[i].klen);
		assert_memory_equal(a->items[i].key, b->items[i].key, a->items[i].klen);
		assert_int_equal(!a->items[i].sub, !b->items[i].sub);
		if (a->items[i].sub) {
			same_bucket(a->items[i].sub, b->items[i].sub);
			continue;
		}
		assert_int_equal(a->items[i].vlen, b->items[i].vlen);
		if (a->items[i].vlen)
			assert_memory_equal(a->items[i].val, b->items[i].val, a->items[i].vlen);
	}
}

/* The value of key in the root leaf page of file f. */
static const unsigned char *root_value(const unsigned char *f, const char *key,
				       uint32_t *vlen)
{
	const unsigned char *meta = f + 4096 + 16;	/* the newer meta: txid 43 */
	const unsigned char *p = f + get64(meta + 16) * 4096;
	unsigned int i;

	assert_int_equal(get64(meta + 48), 43);
	assert_int_equal(get16(p + 8), 0x02);
	for (i = 0; i < get16(p + 10); i++) {
		const unsigned char *e = p + 16 + i * 16;
		const unsigned char *d = e + get32(e + 4);

		if (get32(e + 8) == strlen(key) && !memcmp(d, key, strlen(key))) {
			*vlen = get32(e + 12);
			return d + get32(e + 8);
		}
	}
	fail_msg("no %s in the root page", key);
	return NULL;
}

static void test_round_trip(void **state)
{
	struct si_bolt db, back, again;
	unsigned char *f, *g;
	const unsigned char *v;
	size_t n, m;
	uint32_t vlen;
	char why[128];

	(void)state;
	build(&db);
	assert_int_equal(si_bolt_render(&db, &f, &n), 0);
	assert_int_equal(n % 4096, 0);
	assert_int_equal(si_bolt_parse(f, n, &back, why, sizeof(why)), 0);
	assert_int_equal(back.txid, 43);
	same_bucket(&db.root, &back.root);

	/* Small buckets are inline, big ones have pages of their own. */
	v = root_value(f, "allPods", &vlen);
	assert_int_equal(get64(v), 0);
	assert_int_equal(vlen, 16 + 16);
	v = root_value(f, "many", &vlen);
	assert_int_not_equal(get64(v), 0);
	assert_int_equal(get64(v + 8), 3);
	assert_int_equal(get16(f + get64(v) * 4096 + 8), 0x01);	/* a branch */

	/* Written again, the same pages: only the meta pages move on. */
	assert_int_equal(si_bolt_render(&back, &g, &m), 0);
	assert_int_equal(m, n);
	assert_memory_equal(f + 2 * 4096, g + 2 * 4096, n - 2 * 4096);
	assert_int_equal(si_bolt_parse(g, m, &again, why, sizeof(why)), 0);
	assert_int_equal(again.txid, 45);
	si_bolt_free(&again);
	si_bolt_free(&back);
	si_bolt_free(&db);
	free(f);
	free(g);
}

/*
 * Keys longer than a page: each leaf holds one, so a branch must take
 * two or more, as bolt's own pages do, or the levels never shrink.
 */
static void test_long_keys(void **state)
{
	static char key[6000];
	struct si_bolt db, back;
	struct si_bolt_item *b;
	unsigned char *f;
	size_t n;
	char why[128];
	int i;

	(void)state;
	memset(&db, 0, sizeof(db));
	db.page_size = 4096;
	b = add(&db.root, "long", NULL, 0);
	memset(key, 'k', sizeof(key) - 1);
	for (i = 0; i < 40; i++) {
		snprintf(key, 8, "%06d-", i);
		key[7] = 'k';
		add(b->sub, key, "v", 1);
	}
	assert_int_equal(si_bolt_render(&db, &f, &n), 0);
	assert_true(n < 300 * 4096);	/* 80 leaf pages, some 120 branch pages */
	assert_int_equal(si_bolt_parse(f, n, &back, why, sizeof(why)), 0);
	same_bucket(&db.root, &back.root);
	si_bolt_free(&back);
	si_bolt_free(&db);
	free(f);
}

static void test_value_replaced(void **state)
{
	struct si_bolt db, back;
	struct si_bolt_item *cfg;
	unsigned char *f;
	size_t n;
	char why[128];

	(void)state;
	build(&db);
	cfg = &db.root.items[2].sub->items[0].sub->items[0];
	assert_memory_equal(cfg->key, "config", 6);
	assert_int_equal(si_bolt_set(cfg, "{\"short\":true}", 14), 0);
	assert_int_equal(si_bolt_render(&db, &f, &n), 0);
	assert_int_equal(si_bolt_parse(f, n, &back, why, sizeof(why)), 0);
	same_bucket(&db.root, &back.root);
	si_bolt_free(&back);
	si_bolt_free(&db);
	free(f);
}

static void test_torn_meta(void **state)
{
	struct si_bolt db, back;
	unsigned char *f;
	size_t n;
	char why[128];

	(void)state;
	build(&db);
	assert_int_equal(si_bolt_render(&db, &f, &n), 0);
	/* The newer meta torn: the older one, of the same tree, is used. */
	f[4096 + 16 + 50] ^= 1;
	assert_int_equal(si_bolt_parse(f, n, &back, why, sizeof(why)), 0);
	assert_int_equal(back.txid, 42);
	same_bucket(&db.root, &back.root);
	si_bolt_free(&back);
	f[16 + 50] ^= 1;
	assert_int_equal(si_bolt_parse(f, n, &back, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "no valid meta page"));
	si_bolt_free(&db);
	free(f);
}

/* Damaged anywhere, or cut short, a file is read or refused, never overrun. */
static void test_damage_refused(void **state)
{
	struct si_bolt db, back;
	unsigned char *f;
	size_t n, i;
	char why[128];
	int refused = 0;

	(void)state;
	build(&db);
	assert_int_equal(si_bolt_render(&db, &f, &n), 0);
	for (i = 2 * 4096; i < n; i += 97) {
		unsigned char *g = malloc(n);

		memcpy(g, f, n);
		g[i] ^= 0xa5;
		if (si_bolt_parse(g, n, &back, why, sizeof(why)) < 0)
			refused++;
		else
			si_bolt_free(&back);
		free(g);
	}
	assert_true(refused > 0);
	for (i = n - 4096; i > 2 * 4096; i -= 4096) {
		unsigned char *g = malloc(i);

		memcpy(g, f, i);
		if (si_bolt_parse(g, i, &back, why, sizeof(why)) == 0)
			si_bolt_free(&back);
		else
			assert_non_null(strstr(why, "page"));
		free(g);
	}
	/* A page that points to itself. */
	{
		const unsigned char *meta = f + 4096 + 16;
		uint32_t vlen;
		const unsigned char *v = root_value(f, "many", &vlen);
		unsigned char *br = f + get64(v) * 4096;

		(void)meta;
		put64(br + 16 + 8, get64(v));
		assert_int_equal(si_bolt_parse(f, n, &back, why, sizeof(why)), -1);
		assert_non_null(strstr(why, "reached twice"));
	}
	si_bolt_free(&db);
	free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_long_keys),
		cmocka_unit_test(test_value_replaced),
		cmocka_unit_test(test_torn_meta),
		cmocka_unit_test(test_damage_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
