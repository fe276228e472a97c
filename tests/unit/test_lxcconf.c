// SPDX-License-Identifier: GPL-2.0-or-later
/* An LXC config read and written back (src/lxcconf.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lxcconf.h"

static const char unpriv[] =
	"# Template used to create this container\n"
	"lxc.net.0.type = empty\n"
	"lxc.idmap = u 0 100000 65536\n"
	"lxc.idmap = g 0 100000 65536\n"
	"lxc.rootfs.path = dir:/var/lib/lxc/web/rootfs\n"
	"lxc.include = /usr/share/lxc/config/common.conf\n"
	"lxc.mount.entry = /lib lib none ro,bind 0 0\n"
	"lxc.uts.name = \"web\"\n";

static struct si_lxc_conf c;
static char msg[512];

static int parse(const char *s)
{
	return si_lxc_conf_parse(s, strlen(s), &c, msg, sizeof(msg));
}

static void test_reads_what_a_migration_needs(void **state)
{
	assert_int_equal(parse(unpriv), 0);
	assert_true(c.have_map[0] && c.have_map[1]);
	assert_int_equal(c.map[0].nr, 1);
	assert_int_equal(c.map[0].ext[0].first, 0);
	assert_int_equal(c.map[0].ext[0].target, 100000);
	assert_int_equal(c.map[1].ext[0].count, 65536);
	assert_int_equal(c.idmap_lines, 2);
	assert_int_equal(c.rootfs_kind, SI_LXC_ROOTFS_DIR);
	assert_int_equal(c.rootfs.len, strlen("/var/lib/lxc/web/rootfs"));
	assert_memory_equal(unpriv + c.rootfs.off, "/var/lib/lxc/web/rootfs", c.rootfs.len);
	assert_int_equal(c.nr_include, 1);
	assert_int_equal(c.mount_entries, 1);
}

static void test_rootfs_forms(void **state)
{
	assert_int_equal(parse("lxc.rootfs.path=/srv/c/rootfs\n"), 0);
	assert_int_equal(c.rootfs_kind, SI_LXC_ROOTFS_DIR);
	assert_int_equal(c.rootfs.len, strlen("/srv/c/rootfs"));
	assert_int_equal(parse("lxc.rootfs.path = loop:/srv/c/rootdev  \n"), 0);
	assert_int_equal(c.rootfs_kind, SI_LXC_ROOTFS_LOOP);
	assert_int_equal(c.rootfs.len, strlen("/srv/c/rootdev"));
	assert_int_equal(parse("lxc.rootfs.path = btrfs:/srv/c/rootfs\n"), 0);
	assert_int_equal(c.rootfs_kind, SI_LXC_ROOTFS_OTHER);
	assert_int_equal(c.rootfs_type.len, 5);
	/* The last one counts, as in LXC. */
	assert_int_equal(parse("lxc.rootfs.path = zfs:x\nlxc.rootfs.path = /r\n"), 0);
	assert_int_equal(c.rootfs_kind, SI_LXC_ROOTFS_DIR);
	assert_int_equal(parse("lxc.arch = amd64\n"), 0);
	assert_int_equal(c.rootfs_kind, SI_LXC_ROOTFS_NONE);
}

static void test_privileged_has_no_map(void **state)
{
	assert_int_equal(parse("lxc.rootfs.path = /r\n"), 0);
	assert_false(c.have_map[0] || c.have_map[1]);
	/* An empty lxc.idmap clears the ranges before it. */
	assert_int_equal(parse("lxc.idmap = u 0 1000 10\nlxc.idmap =\n"), 0);
	assert_false(c.have_map[0]);
	assert_int_equal(c.idmap_lines, 2);
}

static void test_bad_lines_say_where(void **state)
{
	assert_int_equal(parse("lxc.arch = amd64\nlxc.idmap = x 0 1 2\n"), -EINVAL);
	assert_non_null(strstr(msg, "line 2"));
	assert_int_equal(parse("lxc.idmap = u 0 100000\n"), -EINVAL);
	assert_int_equal(parse("lxc.idmap = u 0 100000 0\n"), -EINVAL);
	assert_int_equal(parse("lxc.idmap = u 0 100000 10\nlxc.idmap = u 5 200000 10\n"),
			 -EINVAL);
	assert_non_null(strstr(msg, "line 2"));
	assert_int_equal(parse("lxc.id_map = u 0 100000 65536\n"), -EINVAL);
	assert_non_null(strstr(msg, "before 3.0"));
	assert_int_equal(parse("just words\n"), -EINVAL);
	assert_int_equal(si_lxc_conf_parse("a = b\0c", 7, &c, msg, sizeof(msg)), -EINVAL);
}

static void test_render_replaces_only_idmap_lines(void **state)
{
	struct si_idmap map[2] = { { 0 } };
	char e[64];
	size_t n;
	char *out;

	si_idmap_add(&map[0], 0, 200000, 65536, e, sizeof(e));
	si_idmap_add(&map[1], 0, 200000, 65536, e, sizeof(e));
	out = si_lxc_conf_render(unpriv, strlen(unpriv), map,
				 SHIFTIMG_UID | SHIFTIMG_GID, &n);
	assert_non_null(out);
	assert_string_equal(out,
		"# Template used to create this container\n"
		"lxc.net.0.type = empty\n"
		"lxc.idmap = u 0 200000 65536\n"
		"lxc.idmap = g 0 200000 65536\n"
		"lxc.rootfs.path = dir:/var/lib/lxc/web/rootfs\n"
		"lxc.include = /usr/share/lxc/config/common.conf\n"
		"lxc.mount.entry = /lib lib none ro,bind 0 0\n"
		"lxc.uts.name = \"web\"\n");
	assert_int_equal(n, strlen(out));
	free(out);
}

static void test_render_one_kind_keeps_the_other(void **state)
{
	const char in[] = "lxc.idmap = g 0 100000 65536\nlxc.idmap = u 0 100000 65536\n";
	struct si_idmap map[2] = { { 0 } };
	char e[64];
	size_t n;
	char *out;

	si_idmap_add(&map[0], 0, 300000, 1000, e, sizeof(e));
	si_idmap_add(&map[0], 1000, 400000, 1000, e, sizeof(e));
	out = si_lxc_conf_render(in, strlen(in), map, SHIFTIMG_UID, &n);
	assert_string_equal(out, "lxc.idmap = g 0 100000 65536\n"
			    "lxc.idmap = u 0 300000 1000\n"
			    "lxc.idmap = u 1000 400000 1000\n");
	free(out);
}

static void test_render_privileged_appends(void **state)
{
	const char in[] = "lxc.rootfs.path = /r\nlxc.arch = amd64";
	struct si_idmap map[2] = { { 0 } };
	char e[64];
	size_t n;
	char *out;

	si_idmap_add(&map[0], 0, 100000, 65536, e, sizeof(e));
	si_idmap_add(&map[1], 0, 100000, 65536, e, sizeof(e));
	out = si_lxc_conf_render(in, strlen(in), map, SHIFTIMG_UID | SHIFTIMG_GID, &n);
	assert_string_equal(out, "lxc.rootfs.path = /r\nlxc.arch = amd64\n"
			    "lxc.idmap = u 0 100000 65536\n"
			    "lxc.idmap = g 0 100000 65536\n");
	free(out);
	/* What it wrote reads back as the map it was given. */
	assert_int_equal(parse("lxc.idmap = u 0 100000 65536\nlxc.idmap = g 0 100000 65536\n"), 0);
	assert_int_equal(c.map[0].ext[0].target, 100000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reads_what_a_migration_needs),
		cmocka_unit_test(test_rootfs_forms),
		cmocka_unit_test(test_privileged_has_no_map),
		cmocka_unit_test(test_bad_lines_say_where),
		cmocka_unit_test(test_render_replaces_only_idmap_lines),
		cmocka_unit_test(test_render_one_kind_keeps_the_other),
		cmocka_unit_test(test_render_privileged_appends),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
