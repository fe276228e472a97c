// SPDX-License-Identifier: GPL-2.0-or-later
/* A rootful store's recorded id maps moved with its files (src/storemap.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "storemap.h"

static struct si_idmap f[2];
static char why[256];	/* the reason of the last refusal */

/* f: host ids old:65536 go to new:65536, every other host id kept. */
static void maps(uint32_t old, uint32_t new, uint32_t count)
{
	struct si_idmap from = { 0 }, to = { 0 };
	int k;

	assert_int_equal(si_idmap_add(&from, 0, old, count, why, sizeof(why)), 0);
	assert_int_equal(si_idmap_add(&to, 0, new, count, why, sizeof(why)), 0);
	for (k = 0; k < 2; k++) {
		si_idmap_compose(&from, &to, &f[k]);
		assert_int_equal(si_idmap_keep_outside(&f[k], &from), 0);
	}
}

/* json's records through f: what si_storemap_records() returns. */
static int records(const char *json, char **out, struct si_store_ids *ids)
{
	size_t len;

	return si_storemap_records(json, strlen(json), f, out, &len, ids, why, sizeof(why));
}

/* As containers/storage writes layers.json: no spaces. */
static const char layers[] =
	"[{\"id\":\"plain\",\"uidset\":[0,1000]},"
	"{\"id\":\"mapped\",\"uidset\":[0,1000],"
	"\"uidmap\":[{\"container_id\":0,\"host_id\":100000,\"size\":65536}],"
	"\"gidmap\":[{\"container_id\":0,\"host_id\":100000,\"size\":65536}]},"
	"{\"id\":\"other\",\"uidmap\":[{\"container_id\":0,\"host_id\":500000,\"size\":10}]}]";

static void test_layers_moved(void **state)
{
	struct si_store_ids ids;
	char *out;

	(void)state;
	maps(100000, 200000, 65536);
	assert_int_equal(records(layers, &out, &ids), 0);
	assert_non_null(out);
	assert_string_equal(out,
		"[{\"id\":\"plain\",\"uidset\":[0,1000]},"
		"{\"id\":\"mapped\",\"uidset\":[0,1000],"
		"\"uidmap\":[{\"container_id\":0,\"host_id\":200000,\"size\":65536}],"
		"\"gidmap\":[{\"container_id\":0,\"host_id\":200000,\"size\":65536}]},"
		"{\"id\":\"other\",\"uidmap\":[{\"container_id\":0,\"host_id\":500000,\"size\":10}]}]");
	assert_int_equal(ids.nr, 3);
	assert_string_equal(ids.rec[0].id, "plain");
	assert_false(ids.rec[0].mapped);
	assert_true(ids.rec[1].mapped);
	assert_true(ids.rec[2].mapped);
	si_store_ids_free(&ids);
	free(out);

	/* Nothing in the old range: nothing changes. */
	maps(300000, 400000, 65536);
	assert_int_equal(records(layers, &out, &ids), 0);
	assert_null(out);
	si_store_ids_free(&ids);
}

/* A map half in the old range: split, the kept half as it was. */
static void test_map_split(void **state)
{
	static const char one[] =
		"[{\"id\":\"c\",\"uidmap\":[{\"container_id\":0,\"host_id\":150000,\"size\":20000}]}]";
	struct si_store_ids ids;
	char *out;

	(void)state;
	maps(100000, 300000, 65536);
	assert_int_equal(records(one, &out, &ids), 0);
	assert_string_equal(out,
		"[{\"id\":\"c\",\"uidmap\":[{\"container_id\":0,\"host_id\":350000,\"size\":15536},"
		"{\"container_id\":15536,\"host_id\":165536,\"size\":4464}]}]");
	si_store_ids_free(&ids);
	free(out);
}

/* Moved onto host ids a kept part of the map holds: refused. */
static void test_collision_refused(void **state)
{
	static const char two[] =
		"[{\"id\":\"c\",\"uidmap\":[{\"container_id\":0,\"host_id\":100000,\"size\":10},"
		"{\"container_id\":10,\"host_id\":200005,\"size\":10}]}]";
	struct si_store_ids ids;
	char *out;

	(void)state;
	maps(100000, 200000, 65536);
	assert_int_equal(records(two, &out, &ids), -1);
	assert_non_null(strstr(why, "c: the new map would give host id 200005 to two container ids"));
}

static void test_bad_records_refused(void **state)
{
	static const char *const bad[] = {
		"{\"id\":\"x\"}",
		"[{\"names\":[\"x\"]}]",
		"[{\"id\":\"x\",\"uidmap\":{}}]",
		"[{\"id\":\"x\",\"uidmap\":[{\"container_id\":0,\"size\":1}]}]",
		"[{\"id\":\"x\",\"uidmap\":[{\"container_id\":0,\"host_id\":-1,\"size\":1}]}]",
		"[{\"id\":\"x\"",
		"[{\"id\":\"x\",\"uidmap\":[{\"container_id\":0,\"host_id\":100000,\"size\":0}]}]",
		"[{\"id\":\"x\",\"uidmap\":[{\"container_id\":0,\"host_id\":4294967295,\"size\":2}]}]",
	};
	struct si_store_ids ids;
	char *out;
	size_t i;

	(void)state;
	maps(100000, 200000, 65536);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(records(bad[i], &out, &ids), -1);
}

/* libpod's container config: both of its maps, in their own key names. */
static void test_libpod_config(void **state)
{
	static const char cfg[] =
		"{\"spec\":{\"ociVersion\":\"1.0.2-dev\",\"linux\":{"
		"\"uidMappings\":[{\"containerID\":0,\"hostID\":100000,\"size\":65536}],"
		"\"gidMappings\":[{\"containerID\":0,\"hostID\":100000,\"size\":65536}]}},"
		"\"name\":\"c1\",\"idMappingsOptions\":{\"HostUIDMapping\":false,"
		"\"UIDMap\":[{\"container_id\":0,\"host_id\":100000,\"size\":65536}],"
		"\"GIDMap\":[{\"container_id\":0,\"host_id\":100000,\"size\":65536}]}}";
	static const char plain[] = "{\"spec\":{\"linux\":{}},\"name\":\"c2\"}";
	struct si_bolt db = { .page_size = 4096 };
	struct si_bolt_bucket ctr = { 0 }, c1 = { 0 }, c2 = { 0 };
	struct si_bolt_item ctr_items[2], root_item, c1_item, c2_item;
	unsigned int changed;
	char *want;

	(void)state;
	maps(100000, 200000, 65536);
	c1_item = (struct si_bolt_item){ (const unsigned char *)"config", 6,
					 (unsigned char *)cfg, sizeof(cfg) - 1, false, NULL };
	c2_item = (struct si_bolt_item){ (const unsigned char *)"config", 6,
					 (unsigned char *)plain, sizeof(plain) - 1, false, NULL };
	c1 = (struct si_bolt_bucket){ 0, &c1_item, 1, 1 };
	c2 = (struct si_bolt_bucket){ 0, &c2_item, 1, 1 };
	ctr_items[0] = (struct si_bolt_item){ (const unsigned char *)"c1", 2, .sub = &c1 };
	ctr_items[1] = (struct si_bolt_item){ (const unsigned char *)"c2", 2, .sub = &c2 };
	ctr = (struct si_bolt_bucket){ 0, ctr_items, 2, 2 };
	root_item = (struct si_bolt_item){ (const unsigned char *)"ctr", 3, .sub = &ctr };
	db.root = (struct si_bolt_bucket){ 0, &root_item, 1, 1 };

	assert_int_equal(si_storemap_libpod(&db, f, &changed, why, sizeof(why)), 0);
	assert_int_equal(changed, 1);
	want = strdup(cfg);
	for (char *p; (p = strstr(want, "100000"));)
		p[0] = '2';
	assert_int_equal(c1_item.vlen, strlen(want));
	assert_memory_equal(c1_item.val, want, c1_item.vlen);
	assert_false(c2_item.owned);
	free(c1_item.val);
	free(want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layers_moved),
		cmocka_unit_test(test_map_split),
		cmocka_unit_test(test_collision_refused),
		cmocka_unit_test(test_bad_records_refused),
		cmocka_unit_test(test_libpod_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
