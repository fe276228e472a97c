// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Id maps: sorted, non-overlapping extents, as in a user namespace's
 * uid_map.  An extent (first, target, count) sends first+i to target+i.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"

static bool overlaps(uint64_t a, uint64_t b, uint64_t n, uint64_t m)
{
	return a < b + m && b < a + n;
}

/* Inserts e in order of first, for the binary search. */
static void insert_sorted(struct si_idmap *m, struct si_extent e)
{
	unsigned int i;

	for (i = m->nr; i > 0 && m->ext[i - 1].first > e.first; i--)
		m->ext[i] = m->ext[i - 1];
	m->ext[i] = e;
	m->nr++;
}

int si_idmap_add(struct si_idmap *m, uint64_t first, uint64_t target,
		 uint64_t count, char *err, size_t errlen)
{
	unsigned int i;

	if (count == 0) {
		snprintf(err, errlen, "range %llu:%llu:0 has a zero count",
			 (unsigned long long)first, (unsigned long long)target);
		return -1;
	}
	if (first + count - 1 > SI_ID_MAX || target + count - 1 > SI_ID_MAX) {
		snprintf(err, errlen,
			 "range %llu:%llu:%llu goes past the largest id %u",
			 (unsigned long long)first, (unsigned long long)target,
			 (unsigned long long)count, SI_ID_MAX);
		return -1;
	}
	if (m->nr == SI_MAP_MAX) {
		snprintf(err, errlen, "more than %d ranges", SI_MAP_MAX);
		return -1;
	}
	for (i = 0; i < m->nr; i++) {
		const struct si_extent *e = &m->ext[i];
		const char *side = NULL;

		if (overlaps(first, e->first, count, e->count))
			side = "inside";
		else if (overlaps(target, e->target, count, e->count))
			side = "outside";
		if (side) {
			snprintf(err, errlen,
				 "range %llu:%llu:%llu overlaps %u:%u:%u on the %s side",
				 (unsigned long long)first,
				 (unsigned long long)target,
				 (unsigned long long)count, e->first, e->target,
				 e->count, side);
			return -1;
		}
	}
	insert_sorted(m, (struct si_extent){ (uint32_t)first, (uint32_t)target,
					     (uint32_t)count });
	return 0;
}

void si_idmap_invert(const struct si_idmap *m, struct si_idmap *inv)
{
	unsigned int i;

	inv->nr = 0;
	for (i = 0; i < m->nr; i++)
		insert_sorted(inv, (struct si_extent){ m->ext[i].target,
						       m->ext[i].first,
						       m->ext[i].count });
}

/* Joins extents that continue each other on both sides. */
static void join_adjacent(struct si_idmap *m)
{
	unsigned int i, n = 0;

	for (i = 0; i < m->nr; i++) {
		struct si_extent *p = n ? &m->ext[n - 1] : NULL;
		const struct si_extent *e = &m->ext[i];

		if (p && (uint64_t)p->first + p->count == e->first &&
		    (uint64_t)p->target + p->count == e->target)
			p->count += e->count;
		else
			m->ext[n++] = *e;
	}
	m->nr = n;
}

void si_idmap_compose(const struct si_idmap *from, const struct si_idmap *to,
		      struct si_idmap *out)
{
	unsigned int i, j;

	/*
	 * Both maps' inside ranges are disjoint, so their intersections
	 * number fewer than from->nr + to->nr: SI_MAP_EXTENTS holds them.
	 */
	out->nr = 0;
	for (i = 0; i < from->nr; i++) {
		const struct si_extent *f = &from->ext[i];

		for (j = 0; j < to->nr; j++) {
			const struct si_extent *t = &to->ext[j];
			uint64_t lo = f->first > t->first ? f->first : t->first;
			uint64_t fe = (uint64_t)f->first + f->count;
			uint64_t te = (uint64_t)t->first + t->count;
			uint64_t hi = fe < te ? fe : te;

			if (lo >= hi)
				continue;
			insert_sorted(out, (struct si_extent){
				(uint32_t)(f->target + (lo - f->first)),
				(uint32_t)(t->target + (lo - t->first)),
				(uint32_t)(hi - lo) });
		}
	}
	join_adjacent(out);
}

bool si_idmap_lookup(const struct si_idmap *m, uint32_t id, uint32_t *out)
{
	unsigned int lo = 0, hi = m->nr;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;
		const struct si_extent *e = &m->ext[mid];

		if (id < e->first) {
			hi = mid;
		} else if (id - e->first >= e->count) {
			lo = mid + 1;
		} else {
			*out = e->target + (id - e->first);
			return true;
		}
	}
	return false;
}

bool si_idmap_is_identity(const struct si_idmap *m)
{
	unsigned int i;

	for (i = 0; i < m->nr; i++)
		if (m->ext[i].first != m->ext[i].target)
			return false;
	return true;
}

static int by_target(const void *a, const void *b)
{
	const struct si_extent *x = a, *y = b;

	return x->target < y->target ? -1 : x->target > y->target;
}

int si_idmap_keep_outside(struct si_idmap *m, const struct si_idmap *from)
{
	struct si_extent t[SI_MAP_EXTENTS];
	uint64_t at = 0;
	unsigned int i;

	memcpy(t, from->ext, from->nr * sizeof(t[0]));
	qsort(t, from->nr, sizeof(t[0]), by_target);
	for (i = 0; i <= from->nr; i++) {
		uint64_t end = i < from->nr ? t[i].target : (uint64_t)SI_ID_MAX + 1;

		if (end > at) {
			if (m->nr == SI_MAP_EXTENTS)
				return -1;
			insert_sorted(m, (struct si_extent){ (uint32_t)at, (uint32_t)at,
							     (uint32_t)(end - at) });
		}
		if (i < from->nr && (uint64_t)t[i].target + t[i].count > at)
			at = (uint64_t)t[i].target + t[i].count;
	}
	return 0;
}
