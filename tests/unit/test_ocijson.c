// SPDX-License-Identifier: GPL-2.0-or-later
/* OCI metadata found and changed as spans of its bytes (src/ocijson.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ocijson.h"

/* As umoci writes a manifest: no spaces, its own key order. */
static const char manifest[] =
	"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
	"\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
	"\"digest\":\"sha256:aa\",\"size\":123},"
	"\"layers\":[{\"mediaType\":\"m\",\"digest\":\"sha256:l1\",\"size\":10},"
	"{\"mediaType\":\"m\",\"digest\":\"sha256:l2\",\"size\":20,"
	"\"annotations\":{\"containerd.io/snapshot/stargz/toc.digest\":\"sha256:t\"}}]}";

/* As skopeo writes an index: indented. */
static const char indexj[] =
	"{\n  \"schemaVersion\": 2,\n  \"manifests\": [\n"
	"    {\"digest\": \"sha256:m1\", \"size\": 1},\n"
	"    {\"digest\": \"sha256:m2\", \"size\": 2},\n"
	"    {\"digest\": \"sha256:m3\", \"size\": 3}\n  ]\n}\n";

static struct si_json_span doc(const char *s)
{
	struct si_json_span d;

	assert_int_equal(si_json_doc(s, strlen(s), &d), 0);
	return d;
}

static char *splice(const char *s, struct si_json_edits *l)
{
	char *out;
	size_t n;
	struct si_json_span d;

	assert_int_equal(si_json_splice(s, strlen(s), l, &out, &n), 0);
	assert_int_equal(n, strlen(out));
	/* Whatever was changed, the result is JSON. */
	assert_int_equal(si_json_doc(out, n, &d), 0);
	si_json_edits_free(l);
	return out;
}

static void test_finds_values(void **state)
{
	struct si_json_span d = doc(manifest), cfg, v, layers, el;
	char s[64];
	uint64_t size;
	size_t it = 0;
	int n = 0;

	assert_int_equal(si_json_member(manifest, d, "config", &cfg, NULL), 1);
	assert_int_equal(si_json_member(manifest, cfg, "digest", &v, NULL), 1);
	assert_int_equal(si_json_str(manifest, v, s, sizeof(s)), 0);
	assert_string_equal(s, "sha256:aa");
	assert_int_equal(si_json_member(manifest, cfg, "size", &v, NULL), 1);
	assert_int_equal(si_json_u64(manifest, v, &size), 0);
	assert_int_equal(size, 123);
	assert_int_equal(si_json_member(manifest, d, "nothing", &v, NULL), 0);
	assert_int_equal(si_json_member(manifest, d, "layers", &layers, NULL), 1);
	while (si_json_elem(manifest, layers, &it, &el) > 0)
		n++;
	assert_int_equal(n, 2);
	/* A string with an escape is not one OCI names anything with. */
	assert_int_equal(si_json_str("\"a\\u0041\"", (struct si_json_span){ 0, 9 }, s, sizeof(s)), -1);
}

static void test_refuses_bad_json(void **state)
{
	static const char *const bad[] = {
		"{", "{\"a\" 1}", "[1,]x", "{\"a\":tru}", "\"abc", "[1 2]", "",
	};
	struct si_json_span d;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(si_json_doc(bad[i], strlen(bad[i]), &d), -1);
}

static void test_splices_keep_other_bytes(void **state)
{
	struct si_json_edits l = { 0 };
	struct si_json_span d = doc(manifest), cfg, v;
	char *out;

	si_json_member(manifest, d, "config", &cfg, NULL);
	si_json_member(manifest, cfg, "digest", &v, NULL);
	assert_int_equal(si_json_edit_add(&l, v.off, v.len, "\"sha256:bb\""), 0);
	si_json_member(manifest, cfg, "size", &v, NULL);
	assert_int_equal(si_json_edit_add(&l, v.off, v.len, "4567"), 0);
	out = splice(manifest, &l);
	assert_non_null(strstr(out, "\"digest\":\"sha256:bb\",\"size\":4567}"));
	assert_int_equal(strlen(out), strlen(manifest) + 1);
	free(out);

	/* Nothing to change: the same bytes. */
	out = splice(manifest, &l);
	assert_string_equal(out, manifest);
	free(out);
}

static char *cut(const bool *drop)
{
	struct si_json_edits l = { 0 };
	struct si_json_span d = doc(indexj), m;

	si_json_member(indexj, d, "manifests", &m, NULL);
	assert_int_equal(si_json_cut_items(indexj, m, drop, 3, &l), 0);
	return splice(indexj, &l);
}

static void test_elements_cut(void **state)
{
	static const char head[] = "{\n  \"schemaVersion\": 2,\n  \"manifests\": [";
	static const char m1[] = "{\"digest\": \"sha256:m1\", \"size\": 1}";
	static const char m3[] = "{\"digest\": \"sha256:m3\", \"size\": 3}";
	static const struct {
		bool drop[3];
		const char *mid;
	} cases[] = {
		{ { false, true, true }, "\n    M1" },
		{ { false, true, false }, "\n    M1,\n    M3" },
		{ { true, true, false }, "\n    M3" },
		{ { true, false, true }, "\n    M2" },
		{ { true, true, true }, "" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[512], *out = cut(cases[i].drop);
		const char *tail = cases[i].mid[0] ? "\n  ]\n}\n" : "]\n}\n";
		char mid[256];
		const char *p;
		size_t n = 0;

		/* The descriptors that stay, with the indentation they had. */
		for (p = cases[i].mid; *p; p++) {
			if (p[0] == 'M') {
				const char *m = p[1] == '1' ? m1 : p[1] == '3' ? m3 :
						"{\"digest\": \"sha256:m2\", \"size\": 2}";

				n += (size_t)snprintf(mid + n, sizeof(mid) - n, "%s", m);
				p++;
			} else {
				mid[n++] = *p;
			}
		}
		mid[n] = '\0';
		snprintf(want, sizeof(want), "%s%s%s", head, mid, tail);
		assert_string_equal(out, want);
		free(out);
	}
}

static void test_annotation_added_and_removed(void **state)
{
	struct si_json_edits l = { 0 };
	struct si_json_span d = doc(manifest), ly, el;
	char *once, *twice, *back;
	size_t it = 0;

	assert_int_equal(si_json_set_annotation(manifest, d, "org.shiftimg.map", "u:0:1:2", &l), 0);
	once = splice(manifest, &l);
	assert_non_null(strstr(once, "}],\"annotations\":{\"org.shiftimg.map\":\"u:0:1:2\"}}"));

	/* Set again: the value is replaced in place. */
	d = doc(once);
	assert_int_equal(si_json_set_annotation(once, d, "org.shiftimg.map", "u:0:5:6", &l), 0);
	twice = splice(once, &l);
	assert_non_null(strstr(twice, "{\"org.shiftimg.map\":\"u:0:5:6\"}}"));

	/* Removed: the manifest is byte for byte the original again. */
	d = doc(twice);
	assert_int_equal(si_json_set_annotation(twice, d, "org.shiftimg.map", NULL, &l), 0);
	back = splice(twice, &l);
	assert_string_equal(back, manifest);
	free(once);
	free(twice);
	free(back);

	/* A layer's only stargz annotation: the member goes, the layer stays. */
	d = doc(manifest);
	si_json_member(manifest, d, "layers", &ly, NULL);
	si_json_elem(manifest, ly, &it, &el);
	si_json_elem(manifest, ly, &it, &el);
	assert_int_equal(si_json_set_annotation(manifest, el, "containerd.io/snapshot/stargz/toc.digest", NULL, &l), 0);
	back = splice(manifest, &l);
	assert_non_null(strstr(back, "{\"mediaType\":\"m\",\"digest\":\"sha256:l2\",\"size\":20}]}"));
	free(back);
}

static void test_annotation_into_existing(void **state)
{
	static const char m[] = "{ \"a\": 1, \"annotations\": { \"x\": \"y\" } }";
	struct si_json_edits l = { 0 };
	char *out;

	assert_int_equal(si_json_set_annotation(m, doc(m), "k", "v", &l), 0);
	out = splice(m, &l);
	assert_string_equal(out, "{ \"a\": 1, \"annotations\": { \"k\":\"v\",\"x\": \"y\" } }");
	assert_int_equal(si_json_set_annotation(out, doc(out), "k", NULL, &l), 0);
	free(out);
	out = splice("{ \"a\": 1, \"annotations\": { \"k\":\"v\",\"x\": \"y\" } }", &l);
	assert_string_equal(out, m);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_finds_values),
		cmocka_unit_test(test_refuses_bad_json),
		cmocka_unit_test(test_splices_keep_other_bytes),
		cmocka_unit_test(test_elements_cut),
		cmocka_unit_test(test_annotation_added_and_removed),
		cmocka_unit_test(test_annotation_into_existing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
