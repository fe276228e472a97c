// SPDX-License-Identifier: GPL-2.0-or-later
/* The map parser and the id maps. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "shiftimg-int.h"

static struct shiftimg *h;

static int setup(void **state)
{
	h = shiftimg_new();
	return h ? 0 : -1;
}

static int teardown(void **state)
{
	shiftimg_free(h);
	return 0;
}

static void map_is(const char *want)
{
	char buf[512];

	shiftimg_map_format(h, 0, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

static void test_both_kinds(void **state)
{
	assert_int_equal(shiftimg_map_parse(h, SHIFTIMG_BOTH, "0:100000:65536"), 0);
	map_is("u:0:100000:65536 g:0:100000:65536");
}

static void test_fuidshift_forms(void **state)
{
	assert_int_equal(shiftimg_map_parse(h, SHIFTIMG_BOTH, "u:0:1000:10"), 0);
	assert_int_equal(shiftimg_map_parse(h, SHIFTIMG_BOTH, "g:5:2000:1"), 0);
	assert_int_equal(shiftimg_map_parse(h, SHIFTIMG_UID, "b:100:3000:2"), 0);
	map_is("u:0:1000:10 u:100:3000:2 g:5:2000:1 g:100:3000:2");
}

static void refused(const char *spec, const char *words)
{
	assert_int_equal(shiftimg_map_parse(h, SHIFTIMG_BOTH, spec), -EINVAL);
	assert_non_null(strstr(shiftimg_error(h), words));
	si_error_clear(h);
}

static void test_malformed(void **state)
{
	refused("", "expected");
	refused("1:2", "expected");
	refused("1:2:3:4", "expected");
	refused("x:1:2:3", "expected");
	refused("-1:2:3", "expected");
	refused("1:2:3 ", "expected");
	refused("1::3", "expected");
	refused("99999999999999999999:0:1", "expected");
	refused("0:100000:0", "zero count");
	refused("0:4294967295:1", "largest id");
	refused("4294967295:0:1", "largest id");
	refused("0:0:4294967296", "largest id");
	map_is("");
}

static void test_overlaps(void **state)
{
	assert_int_equal(shiftimg_map_parse(h, SHIFTIMG_BOTH, "0:100000:1000"), 0);
	refused("999:200000:5", "inside side");
	refused("2000:100999:5", "outside side");
	/* One range's outside may be another's inside: they are two spaces. */
	assert_int_equal(shiftimg_map_parse(h, SHIFTIMG_BOTH, "100000:0:1000"), 0);
	/* A range over the whole id space overlaps every other. */
	assert_int_equal(shiftimg_map_parse(h, SHIFTIMG_BOTH, "0:0:4294967295"), -EINVAL);
}

static void test_lookup_and_invert(void **state)
{
	struct si_idmap m = { 0 }, inv;
	char err[128];
	uint32_t out;
	unsigned int i;

	/* Inserted out of order; lookups must find each range. */
	for (i = 0; i < 100; i++)
		assert_int_equal(si_idmap_add(&m, (99 - i) * 1000, 500000 + (99 - i) * 10,
					      10, err, sizeof(err)), 0);
	assert_true(si_idmap_lookup(&m, 0, &out));
	assert_int_equal(out, 500000);
	assert_true(si_idmap_lookup(&m, 99009, &out));
	assert_int_equal(out, 500999);
	assert_false(si_idmap_lookup(&m, 10, &out));
	assert_false(si_idmap_lookup(&m, 99010, &out));
	si_idmap_invert(&m, &inv);
	assert_true(si_idmap_lookup(&inv, 500999, &out));
	assert_int_equal(out, 99009);
	assert_false(si_idmap_lookup(&inv, 0, &out));
	assert_false(si_idmap_is_identity(&m));
}

/* Builds a map from "first:target:count" triples. */
static void map_of(struct si_idmap *m, const char *spec)
{
	char err[128], *copy = strdup(spec), *tok, *save = NULL;
	unsigned long long v[3];

	m->nr = 0;
	for (tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		assert_int_equal(sscanf(tok, "%llu:%llu:%llu", &v[0], &v[1], &v[2]), 3);
		assert_int_equal(si_idmap_add(m, v[0], v[1], v[2], err, sizeof(err)), 0);
	}
	free(copy);
}

static void extents_are(const struct si_idmap *m, const char *want)
{
	char buf[1024] = "";
	size_t len = 0;
	unsigned int i;

	for (i = 0; i < m->nr; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%u:%u:%u",
					i ? " " : "", m->ext[i].first,
					m->ext[i].target, m->ext[i].count);
	assert_string_equal(buf, want);
}

static void composed_is(const char *from, const char *to, const char *want)
{
	struct si_idmap f, t, out;

	map_of(&f, from);
	map_of(&t, to);
	si_idmap_compose(&f, &t, &out);
	extents_are(&out, want);
}

static void test_compose(void **state)
{
	/* One range moved: old host id -> container id -> new host id. */
	composed_is("0:100000:65536", "0:200000:65536", "100000:200000:65536");
	/* The new map split in two: so is the composed one. */
	composed_is("0:100000:65536", "0:200000:1000 1000:300000:64536",
		    "100000:200000:1000 101000:300000:64536");
	/* Container ids the new map leaves out are not in the result. */
	composed_is("0:100000:65536", "1:200001:10", "100001:200001:10");
	/* Container ids the old map leaves out cannot be on disk. */
	composed_is("10:100010:5", "0:200000:65536", "100010:200010:5");
	/* A rootless store: the user's own uid stays, its range moves. */
	composed_is("0:1000:1 1:100000:65536", "0:1000:1 1:200000:65536",
		    "1000:1000:1 100000:200000:65536");
	/* Pieces that continue each other on both sides are joined. */
	composed_is("0:100:10 10:110:10", "0:500:20", "100:500:20");
	/* Not joined where the old host ids do not continue. */
	composed_is("0:100:10 10:200:10", "0:500:20", "100:500:10 200:510:10");
	/* The result is sorted by old host id, whatever the container order. */
	composed_is("0:900:10 10:100:10", "0:0:20", "100:10:10 900:0:10");
	/* Disjoint maps compose to nothing. */
	composed_is("0:100000:10", "20:0:10", "");
}

/* Two maps of SI_MAP_MAX ranges, cut apart: the most pieces there can be. */
static void test_compose_most(void **state)
{
	struct si_idmap f = { 0 }, t = { 0 }, out;
	char err[128];
	uint32_t id, want, got;
	unsigned int i;

	for (i = 0; i < SI_MAP_MAX; i++) {
		assert_int_equal(si_idmap_add(&f, i * 10, 1000000 + i * 20, 10,
					      err, sizeof(err)), 0);
		assert_int_equal(si_idmap_add(&t, i * 10 + 5, 5000000 + i * 30, 10,
					      err, sizeof(err)), 0);
	}
	si_idmap_compose(&f, &t, &out);
	assert_true(out.nr <= SI_MAP_EXTENTS);
	assert_int_equal(out.nr, 2 * SI_MAP_MAX - 1);
	/* Every id agrees with the two lookups it stands for. */
	for (i = 0; i < SI_MAP_MAX * 10; i++) {
		bool inside = si_idmap_lookup(&t, i, &want);

		assert_true(si_idmap_lookup(&f, i, &id));
		assert_int_equal(si_idmap_lookup(&out, id, &got), inside);
		if (inside)
			assert_int_equal(got, want);
	}
}

static void applied_is(const char *want)
{
	char buf[512];

	shiftimg_map_format(h, SHIFTIMG_APPLIED, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

/* The handle composes the maps for a run, both ways. */
static void test_from_map(void **state)
{
	char dir[] = "/tmp/test_map.XXXXXX";

	assert_non_null(mkdtemp(dir));
	assert_int_equal(shiftimg_map_parse(h, SHIFTIMG_FROM | SHIFTIMG_BOTH,
					    "0:100000:65536"), 0);
	assert_int_equal(shiftimg_map_parse(h, SHIFTIMG_BOTH, "0:200000:65536"), 0);
	/* u: overrides the id kinds, not the side. */
	assert_int_equal(shiftimg_map_parse(h, SHIFTIMG_FROM | SHIFTIMG_BOTH,
					    "u:70000:1000:1"), 0);
	map_is("u:0:200000:65536 g:0:200000:65536");
	shiftimg_set_flags(h, SHIFTIMG_DRY_RUN);
	assert_int_equal(shiftimg_run(h, dir), 0);
	applied_is("u:100000:200000:65536 g:100000:200000:65536");
	shiftimg_set_flags(h, SHIFTIMG_DRY_RUN | SHIFTIMG_REVERSE);
	assert_int_equal(shiftimg_run(h, dir), 0);
	applied_is("u:200000:100000:65536 g:200000:100000:65536");
	rmdir(dir);
}

static void test_from_map_alone(void **state)
{
	char dir[] = "/tmp/test_map.XXXXXX";

	assert_non_null(mkdtemp(dir));
	assert_int_equal(shiftimg_map_parse(h, SHIFTIMG_UID, "0:200000:65536"), 0);
	assert_int_equal(shiftimg_map_parse(h, SHIFTIMG_FROM | SHIFTIMG_GID,
					    "0:100000:65536"), 0);
	shiftimg_set_flags(h, SHIFTIMG_DRY_RUN);
	assert_int_equal(shiftimg_run(h, dir), -EINVAL);
	assert_non_null(strstr(shiftimg_error(h), "from-map for group ids needs a map"));
	rmdir(dir);
}

static char *write_tmp(const char *text)
{
	static char path[64];
	int fd;

	strcpy(path, "/tmp/test_map.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void test_map_file(void **state)
{
	char *p = write_tmp("         0     100000      65536\n\n  70000 0 1\n");

	assert_int_equal(shiftimg_map_load(h, SHIFTIMG_UID, p), 0);
	map_is("u:0:100000:65536 u:70000:0:1");
	unlink(p);
	p = write_tmp("0 100000\n");
	assert_int_equal(shiftimg_map_load(h, SHIFTIMG_GID, p), -EINVAL);
	assert_non_null(strstr(shiftimg_error(h), ":1: expected"));
	unlink(p);
}

static void test_subid(void **state)
{
	char *u = strdup(write_tmp("bob:300000:65536\nnobody:200000:1000\n"));
	char *g = strdup(write_tmp("65534:400000:5000\n"));

	/* By name in subuid, by number in subgid. */
	assert_int_equal(shiftimg_map_subid(h, SHIFTIMG_BOTH, "nobody", u, g), 0);
	map_is("u:0:200000:1000 g:0:400000:5000");
	assert_int_equal(shiftimg_map_subid(h, SHIFTIMG_BOTH, "carol", u, g), -ENOENT);
	assert_non_null(strstr(shiftimg_error(h), "no subordinate ids for carol"));
	/* The other side, and one kind only. */
	assert_int_equal(shiftimg_map_subid(h, SHIFTIMG_FROM | SHIFTIMG_GID, "nobody", u, g), 0);
	map_is("u:0:200000:1000 g:0:400000:5000");
	{
		char buf[128];

		shiftimg_map_format(h, SHIFTIMG_FROM, buf, sizeof(buf));
		assert_string_equal(buf, "g:0:400000:5000");
	}
	unlink(u);
	unlink(g);
	free(u);
	free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_both_kinds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fuidshift_forms, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_overlaps, setup, teardown),
		cmocka_unit_test(test_lookup_and_invert),
		cmocka_unit_test(test_compose),
		cmocka_unit_test(test_compose_most),
		cmocka_unit_test_setup_teardown(test_from_map, setup, teardown),
		cmocka_unit_test_setup_teardown(test_from_map_alone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_map_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_subid, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
