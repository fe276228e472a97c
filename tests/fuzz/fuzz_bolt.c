// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * libpod's database and a store's records on hostile bytes: a bolt file
 * that is read can have its container configs' maps moved and be
 * written again, and what is written reads back as the same tree; the
 * bytes taken as layers.json either move or are refused.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bolt.h"
#include "storemap.h"

static void same_bucket(const struct si_bolt_bucket *a, const struct si_bolt_bucket *b)
{
	size_t i;

	if (a->nr != b->nr || a->seq != b->seq)
		abort();
	for (i = 0; i < a->nr; i++) {
		const struct si_bolt_item *x = &a->items[i], *y = &b->items[i];

		if (x->klen != y->klen || memcmp(x->key, y->key, x->klen) ||
		    !x->sub != !y->sub)
			abort();
		if (x->sub)
			same_bucket(x->sub, y->sub);
		else if (x->vlen != y->vlen || (x->vlen && memcmp(x->val, y->val, x->vlen)))
			abort();
	}
}

static void maps(struct si_idmap f[2])
{
	struct si_idmap from = { 0 }, to = { 0 };
	char e[64];
	int k;

	si_idmap_add(&from, 0, 100000, 65536, e, sizeof(e));
	si_idmap_add(&to, 0, 200000, 1000, e, sizeof(e));
	si_idmap_add(&to, 1000, 300000, 64536, e, sizeof(e));
	for (k = 0; k < 2; k++) {
		si_idmap_compose(&from, &to, &f[k]);
		si_idmap_keep_outside(&f[k], &from);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct si_idmap f[2];
	struct si_bolt db, back;
	struct si_store_ids ids;
	unsigned char *out;
	unsigned int changed;
	char why[256], *json;
	size_t len;

	if (!f[0].nr)
		maps(f);
	if (si_storemap_records((const char *)data, size, f, &json, &len, &ids,
				why, sizeof(why)) == 0) {
		free(json);
		si_store_ids_free(&ids);
	}
	if (si_bolt_parse(data, size, &db, why, sizeof(why)) < 0)
		return 0;
	si_storemap_libpod(&db, f, &changed, why, sizeof(why));
	if (si_bolt_render(&db, &out, &len) < 0)
		abort();
	if (si_bolt_parse(out, len, &back, why, sizeof(why)) < 0)
		abort();
	same_bucket(&db.root, &back.root);
	si_bolt_free(&back);
	si_bolt_free(&db);
	free(out);
	return 0;
}
