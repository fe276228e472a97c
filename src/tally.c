// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Tallies: counts of a run and a small, bounded record of unmapped ids,
 * so that --unmapped=fail can say which ids, how many objects, and where.
 */
#include <stdlib.h>
#include <string.h>

#include "rules.h"

void si_tally_init(struct si_tally *t)
{
	memset(t, 0, sizeof(*t));
}

void si_tally_free(struct si_tally *t)
{
	unsigned int i;

	for (i = 0; i < t->nr_examples; i++)
		free(t->examples[i]);
	for (i = 0; i < t->nr_priv; i++)
		free(t->priv[i]);
	si_tally_init(t);
}

static void tally_add_id(struct si_tally *t, uint8_t kind, uint32_t id,
			 uint64_t count)
{
	unsigned int i;

	for (i = 0; i < t->nr_ids; i++) {
		if (t->ids[i].id == id && t->ids[i].kind == kind) {
			t->ids[i].count += count;
			return;
		}
	}
	if (t->nr_ids == SI_TALLY_IDS) {
		t->more_ids++;
		return;
	}
	/* Sorted by kind, then id, so that reports do not depend on order. */
	for (i = t->nr_ids; i > 0 && (t->ids[i - 1].kind > kind ||
	     (t->ids[i - 1].kind == kind && t->ids[i - 1].id > id)); i--)
		t->ids[i] = t->ids[i - 1];
	t->ids[i] = (struct si_tally_id){ id, kind, count };
	t->nr_ids++;
}

void si_tally_id(struct si_tally *t, enum si_kind kind, uint32_t id)
{
	tally_add_id(t, (uint8_t)kind, id, 1);
	t->pending = true;
}

/*
 * Keeps the SI_TALLY_EXAMPLES smallest paths, in order: whatever order
 * a parallel walk met them in, the report is the same.
 */
static void keep_example(char **ex, unsigned int *nr, const char *path)
{
	unsigned int i, n = *nr;
	char *copy;

	if (!path)
		return;
	for (i = n; i > 0 && strcmp(ex[i - 1], path) > 0; i--)
		;
	if (i == SI_TALLY_EXAMPLES)
		return;
	copy = strdup(path);
	if (!copy)
		return;
	if (n == SI_TALLY_EXAMPLES)
		free(ex[--n]);
	memmove(&ex[i + 1], &ex[i], (n - i) * sizeof(ex[0]));
	ex[i] = copy;
	*nr = n + 1;
}

static void tally_example(struct si_tally *t, const char *path)
{
	keep_example(t->examples, &t->nr_examples, path);
}

void si_tally_object(struct si_tally *t, const char *path)
{
	if (!t->pending)
		return;
	t->pending = false;
	t->st.unmapped++;
	tally_example(t, path);
}

void si_tally_privileged(struct si_tally *t, const char *path)
{
	t->privileged++;
	keep_example(t->priv, &t->nr_priv, path);
}

void si_tally_merge(struct si_tally *dst, const struct si_tally *src)
{
	struct shiftimg_stats *d = &dst->st;
	const struct shiftimg_stats *s = &src->st;
	unsigned int i;

	d->objects += s->objects;
	d->changed += s->changed;
	d->hardlinks += s->hardlinks;
	d->acls += s->acls;
	d->caps += s->caps;
	d->override_stat += s->override_stat;
	d->flags_cleared += s->flags_cleared;
	d->unmapped += s->unmapped;
	d->skipped_mounts += s->skipped_mounts;
	d->errors += s->errors;
	for (i = 0; i < src->nr_ids; i++)
		tally_add_id(dst, src->ids[i].kind, src->ids[i].id,
			     src->ids[i].count);
	dst->more_ids += src->more_ids;
	for (i = 0; i < src->nr_examples; i++)
		tally_example(dst, src->examples[i]);
	dst->privileged += src->privileged;
	for (i = 0; i < src->nr_priv; i++)
		keep_example(dst->priv, &dst->nr_priv, src->priv[i]);
}
