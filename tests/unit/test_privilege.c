// SPDX-License-Identifier: GPL-2.0-or-later
/* The privilege rule: which shifts would hand out real root. */
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "rules.h"

/* first:target:count for both kinds, optionally inverted. */
static void rules(struct si_rules *r, uint32_t first, uint32_t target,
		  uint32_t count, bool reverse)
{
	struct si_idmap m = { 0 };
	char err[128];
	int k;

	memset(r, 0, sizeof(*r));
	assert_int_equal(si_idmap_add(&m, first, target, count, err,
				      sizeof(err)), 0);
	for (k = 0; k < 2; k++) {
		if (reverse)
			si_idmap_invert(&m, &r->map[k]);
		else
			r->map[k] = m;
	}
	r->unmapped = SHIFTIMG_UNMAPPED_KEEP;
}

static void test_make_root(void **state)
{
	struct si_rules r;

	rules(&r, 0, 100000, 65536, false);
	assert_false(si_rules_make_root(&r));
	rules(&r, 0, 100000, 65536, true);
	assert_true(si_rules_make_root(&r));
	/* Not a reverse run, but 1000 becomes root all the same. */
	rules(&r, 1000, 0, 1, false);
	assert_true(si_rules_make_root(&r));
	rules(&r, 0, 0, 65536, false);
	assert_false(si_rules_make_root(&r));
	/* Only the gid map sends something to 0. */
	rules(&r, 0, 100000, 65536, false);
	r.map[SI_KGID].nr = 1;
	r.map[SI_KGID].ext[0] = (struct si_extent){ 5, 0, 1 };
	assert_true(si_rules_make_root(&r));
}

static void test_setuid_setgid(void **state)
{
	/* The owner becomes root: setuid executables, not other files. */
	assert_int_equal(si_grants_root(S_IFREG | 04755, 100000, 100000, 0, 0),
			 SI_PRIV_SETUID);
	assert_int_equal(si_grants_root(S_IFREG | 04100, 100000, 5, 0, 5),
			 SI_PRIV_SETUID);
	assert_int_equal(si_grants_root(S_IFREG | 0755, 100000, 100000, 0, 0), 0);
	assert_int_equal(si_grants_root(S_IFREG | 04644, 100000, 100000, 0, 0), 0);
	assert_int_equal(si_grants_root(S_IFDIR | 04755, 100000, 100000, 0, 0), 0);
	assert_int_equal(si_grants_root(S_IFLNK | 04777, 100000, 100000, 0, 0), 0);
	/* Already root's before the shift: nothing new is handed out. */
	assert_int_equal(si_grants_root(S_IFREG | 06755, 0, 0, 0, 0), 0);
	/* Owner becomes an ordinary user. */
	assert_int_equal(si_grants_root(S_IFREG | 06755, 100005, 100005, 5, 5), 0);

	/* setgid counts only with group execute, as exec(2) sees it. */
	assert_int_equal(si_grants_root(S_IFREG | 02755, 100000, 100000, 0, 0),
			 SI_PRIV_SETGID);
	assert_int_equal(si_grants_root(S_IFREG | 02745, 100000, 100000, 0, 0), 0);
	assert_int_equal(si_grants_root(S_IFREG | 02711, 7, 100000, 7, 0),
			 SI_PRIV_SETGID);
	assert_int_equal(si_grants_root(S_IFREG | 06755, 100000, 100000, 0, 0),
			 SI_PRIV_SETUID | SI_PRIV_SETGID);
	assert_string_equal(si_priv_name(SI_PRIV_SETUID | SI_PRIV_CAP),
			    "setuid root, root capabilities");
}

static void put32(unsigned char *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

/* A v3 capability value with CAP_NET_RAW permitted and effective. */
static void cap_v3(unsigned char *b, uint32_t rootid)
{
	memset(b, 0, 24);
	put32(b, 0x03000001);
	put32(b + 4, 1u << 13);
	put32(b + 20, rootid);
}

static void test_caps(void **state)
{
	unsigned char in[24], out[SI_CAP_MAX];
	struct si_rules r;
	size_t outlen;

	/* Unshifting a container's capability makes it real root's (v2). */
	rules(&r, 0, 100000, 65536, true);
	cap_v3(in, 100000);
	assert_true(si_cap(&r, in, 24, out, &outlen, NULL) & SI_CHANGED);
	assert_int_equal(outlen, 20);
	assert_int_equal(si_cap_grants_root(in, 24, out, outlen), SI_PRIV_CAP);
	/* One of the container's users: stays v3, not root. */
	cap_v3(in, 101000);
	si_cap(&r, in, 24, out, &outlen, NULL);
	assert_int_equal(outlen, 24);
	assert_int_equal(si_cap_grants_root(in, 24, out, outlen), 0);

	/* Shifting into the container: real root's cap becomes rootid 100000. */
	rules(&r, 0, 100000, 65536, false);
	memcpy(out, in, 20);
	put32(in, 0x02000001);
	si_cap(&r, in, 20, out, &outlen, NULL);
	assert_int_equal(si_cap_grants_root(in, 20, out, outlen), 0);

	/* A v2 value left as it is was root's before: nothing new. */
	assert_int_equal(si_cap_grants_root(in, 20, in, 20), 0);
	/* v3 rootid 0 written out counts, malformed values do not. */
	cap_v3(in, 7);
	cap_v3(out, 0);
	assert_int_equal(si_cap_grants_root(in, 24, out, 24), SI_PRIV_CAP);
	assert_int_equal(si_cap_grants_root(in, 23, out, 24), 0);
	assert_int_equal(si_cap_grants_root(in, 24, out, 3), 0);
	put32(out, 0x02000001);
	assert_int_equal(si_cap_grants_root(in, 24, out, 24), 0);
}

static void test_tally(void **state)
{
	struct si_tally a, b;
	char name[16];
	int i;

	si_tally_init(&a);
	si_tally_init(&b);
	for (i = 9; i >= 0; i--) {
		snprintf(name, sizeof(name), "f%d", i);
		si_tally_privileged(i % 2 ? &a : &b, name);
	}
	assert_int_equal(a.privileged, 5);
	si_tally_merge(&a, &b);
	assert_int_equal(a.privileged, 10);
	/* The smallest paths, sorted, bounded. */
	assert_int_equal(a.nr_priv, SI_TALLY_EXAMPLES);
	assert_string_equal(a.priv[0], "f0");
	assert_string_equal(a.priv[4], "f4");
	/* Unmapped examples are kept apart. */
	assert_int_equal(a.nr_examples, 0);
	si_tally_free(&a);
	si_tally_free(&b);
	assert_int_equal(a.privileged, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_make_root),
		cmocka_unit_test(test_setuid_setgid),
		cmocka_unit_test(test_caps),
		cmocka_unit_test(test_tally),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
