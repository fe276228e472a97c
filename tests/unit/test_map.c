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

	shiftimg_map_format(h, buf, sizeof(buf));
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
	assert_int_equal(shiftimg_map_subid(h, "nobody", u, g), 0);
	map_is("u:0:200000:1000 g:0:400000:5000");
	assert_int_equal(shiftimg_map_subid(h, "carol", u, g), -ENOENT);
	assert_non_null(strstr(shiftimg_error(h), "no subordinate ids for carol"));
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
		cmocka_unit_test_setup_teardown(test_map_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_subid, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
