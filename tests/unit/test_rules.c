// SPDX-License-Identifier: GPL-2.0-or-later
/* The rules on buffers: ACLs, capabilities, override_stat, policies. */
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rules.h"

static struct si_rules r;
static struct si_tally t;

/* 0:100000:65536 for both kinds, under the given policy. */
static void rules(enum shiftimg_unmapped policy, bool reverse)
{
	struct si_idmap m = { 0 };
	char err[128];
	int k;

	memset(&r, 0, sizeof(r));
	assert_int_equal(si_idmap_add(&m, 0, 100000, 65536, err, sizeof(err)), 0);
	for (k = 0; k < 2; k++) {
		if (reverse)
			si_idmap_invert(&m, &r.map[k]);
		else
			r.map[k] = m;
	}
	r.unmapped = policy;
	si_tally_free(&t);
	si_tally_init(&t);
}

static void put32(unsigned char *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

/* A VFS ACL: version 2, then (tag, perm, id) entries. */
static size_t vfs_acl(unsigned char *b, const uint32_t (*e)[2], size_t n)
{
	size_t i;

	put32(b, 2);
	for (i = 0; i < n; i++) {
		b[4 + 8 * i] = (unsigned char)e[i][0];
		b[5 + 8 * i] = 0;
		b[6 + 8 * i] = 7;
		b[7 + 8 * i] = 0;
		put32(b + 8 + 8 * i, e[i][1]);
	}
	return 4 + 8 * n;
}

static const uint32_t acl_entries[][2] = {
	{ 0x01, 0xffffffff }, { 0x02, 1000 }, { 0x02, 0 }, { 0x04, 0xffffffff },
	{ 0x08, 65535 }, { 0x10, 0xffffffff }, { 0x20, 0xffffffff },
};

static void test_acl_xattr(void **state)
{
	unsigned char in[128], out[128];
	size_t len = vfs_acl(in, acl_entries, 7);

	rules(SHIFTIMG_UNMAPPED_FAIL, false);
	assert_int_equal(si_acl_xattr(&r, in, len, out, &t), SI_CHANGED);
	assert_int_equal(get32(out + 4 + 8 + 4), 101000);
	assert_int_equal(get32(out + 4 + 16 + 4), 100000);
	assert_int_equal(get32(out + 4 + 32 + 4), 165535);
	/* Entries without a qualifier keep ACL_UNDEFINED_ID. */
	assert_int_equal(get32(out + 4 + 4), 0xffffffff);
	assert_int_equal(get32(out + 4 + 48 + 4), 0xffffffff);
	/* Tags and permissions are untouched. */
	for (size_t off = 4; off < len; off += 8)
		assert_memory_equal(in + off, out + off, 4);

	/* In place works too, and --reverse gives the input back. */
	rules(SHIFTIMG_UNMAPPED_FAIL, true);
	assert_int_equal(si_acl_xattr(&r, out, len, out, &t), SI_CHANGED);
	assert_memory_equal(in, out, len);
}

static void test_acl_malformed(void **state)
{
	unsigned char in[128], out[128];
	size_t len = vfs_acl(in, acl_entries, 7);

	rules(SHIFTIMG_UNMAPPED_FAIL, false);
	memset(out, 0xaa, sizeof(out));
	assert_int_equal(si_acl_xattr(&r, in, 0, out, &t), -EINVAL);
	assert_int_equal(si_acl_xattr(&r, in, 3, out, &t), -EINVAL);
	assert_int_equal(si_acl_xattr(&r, in, len - 1, out, &t), -EINVAL);
	assert_int_equal(si_acl_xattr(&r, in, len - 4, out, &t), -EINVAL);
	put32(in, 1);
	assert_int_equal(si_acl_xattr(&r, in, len, out, &t), -EINVAL);
	put32(in, 2);
	in[4 + 8 * 3] = 0x40;		/* an unknown tag */
	assert_int_equal(si_acl_xattr(&r, in, len, out, &t), -EINVAL);
	/* Nothing was written on a refusal. */
	for (size_t i = 0; i < sizeof(out); i++)
		assert_int_equal(out[i], 0xaa);
	/* An ACL with no entries at all is valid and unchanged. */
	assert_int_equal(si_acl_xattr(&r, in, 4, out, &t), 0);
}

static void test_acl_ext4(void **state)
{
	/* version 1; USER_OBJ(4) USER 1000(8) GROUP_OBJ(4) GROUP 7(8) MASK(4) OTHER(4) */
	unsigned char in[64] = { 0 }, out[64], back[64];
	size_t len = 4;

	put32(in, 1);
	in[len] = 0x01; len += 4;
	in[len] = 0x02; put32(in + len + 4, 1000); len += 8;
	in[len] = 0x04; len += 4;
	in[len] = 0x08; put32(in + len + 4, 7); len += 8;
	in[len] = 0x10; len += 4;
	in[len] = 0x20; len += 4;

	rules(SHIFTIMG_UNMAPPED_FAIL, false);
	assert_int_equal(si_acl_ext4(&r, in, len, out, &t), SI_CHANGED);
	assert_int_equal(get32(out + 12), 101000);
	assert_int_equal(get32(out + 24), 100007);
	rules(SHIFTIMG_UNMAPPED_FAIL, true);
	assert_int_equal(si_acl_ext4(&r, out, len, back, &t), SI_CHANGED);
	assert_memory_equal(in, back, len);

	/* Truncated inside a long entry, trailing bytes, wrong version. */
	assert_int_equal(si_acl_ext4(&r, in, 10, out, &t), -EINVAL);
	assert_int_equal(si_acl_ext4(&r, in, len + 2, out, &t), -EINVAL);
	put32(in, 2);
	assert_int_equal(si_acl_ext4(&r, in, len, out, &t), -EINVAL);
}

static size_t cap(unsigned char *b, uint32_t rev, int32_t rootid)
{
	memset(b, 0, 24);
	put32(b, rev | 1);		/* effective */
	put32(b + 4, 1u << 13);		/* CAP_NET_RAW permitted */
	if (rev == 0x01000000)
		return 12;
	put32(b + 12, 1u << 2);		/* a high-word bit */
	if (rev == 0x02000000)
		return 20;
	put32(b + 20, (uint32_t)rootid);
	return 24;
}

static void test_cap(void **state)
{
	unsigned char in[24], out[SI_CAP_MAX], back[SI_CAP_MAX];
	size_t len, olen, blen;

	rules(SHIFTIMG_UNMAPPED_FAIL, false);
	/* v2 becomes v3 with rootid map(0). */
	len = cap(in, 0x02000000, 0);
	assert_int_equal(si_cap(&r, in, len, out, &olen, &t), SI_CHANGED);
	assert_int_equal(olen, 24);
	assert_int_equal(get32(out), 0x03000001);
	assert_memory_equal(in + 4, out + 4, 16);
	assert_int_equal(get32(out + 20), 100000);
	/* ... and --reverse makes it v2 again, byte for byte. */
	rules(SHIFTIMG_UNMAPPED_FAIL, true);
	assert_int_equal(si_cap(&r, out, olen, back, &blen, &t), SI_CHANGED);
	assert_int_equal(blen, 20);
	assert_memory_equal(in, back, 20);

	/* v3 rootid 1000 -> 101000 -> 1000 (stays v3). */
	rules(SHIFTIMG_UNMAPPED_FAIL, false);
	len = cap(in, 0x03000000, 1000);
	assert_int_equal(si_cap(&r, in, len, out, &olen, &t), SI_CHANGED);
	assert_int_equal(get32(out + 20), 101000);
	rules(SHIFTIMG_UNMAPPED_FAIL, true);
	assert_int_equal(si_cap(&r, out, olen, back, &blen, &t), SI_CHANGED);
	assert_int_equal(blen, 24);
	assert_memory_equal(in, back, 24);

	/* v1 (low 32 bits only) becomes v3 with zero high words. */
	rules(SHIFTIMG_UNMAPPED_FAIL, false);
	len = cap(in, 0x01000000, 0);
	assert_int_equal(si_cap(&r, in, len, out, &olen, &t), SI_CHANGED);
	assert_int_equal(olen, 24);
	assert_int_equal(get32(out), 0x03000001);
	assert_int_equal(get32(out + 4), 1u << 13);
	assert_int_equal(get32(out + 12), 0);
	assert_int_equal(get32(out + 16), 0);
	assert_int_equal(get32(out + 20), 100000);
}

static void test_cap_malformed(void **state)
{
	unsigned char in[32], out[SI_CAP_MAX];
	size_t olen = 99;

	rules(SHIFTIMG_UNMAPPED_FAIL, false);
	cap(in, 0x02000000, 0);
	assert_int_equal(si_cap(&r, in, 0, out, &olen, &t), -EINVAL);
	assert_int_equal(si_cap(&r, in, 3, out, &olen, &t), -EINVAL);
	assert_int_equal(si_cap(&r, in, 19, out, &olen, &t), -EINVAL);
	assert_int_equal(si_cap(&r, in, 24, out, &olen, &t), -EINVAL);	/* v2 tag, v3 size */
	cap(in, 0x03000000, 5);
	assert_int_equal(si_cap(&r, in, 20, out, &olen, &t), -EINVAL);
	cap(in, 0x04000000, 5);
	assert_int_equal(si_cap(&r, in, 24, out, &olen, &t), -EINVAL);
	assert_int_equal(olen, 99);
}

static void test_unmapped_policies(void **state)
{
	unsigned char in[24], out[SI_CAP_MAX];
	uint32_t id;
	size_t olen;

	rules(SHIFTIMG_UNMAPPED_FAIL, false);
	assert_int_equal(si_shift_id(&r, SI_KUID, 70000, &id, &t), SI_UNMAPPED);
	assert_int_equal(id, 70000);
	si_tally_object(&t, "a/file");
	assert_int_equal(si_shift_id(&r, SI_KGID, 70001, &id, &t), SI_UNMAPPED);
	assert_int_equal(si_shift_id(&r, SI_KUID, 70000, &id, &t), SI_UNMAPPED);
	si_tally_object(&t, "b/file");
	si_tally_object(&t, "c/clean");		/* nothing pending: not counted */
	assert_int_equal(t.st.unmapped, 2);
	assert_int_equal(t.nr_ids, 2);
	assert_int_equal(t.ids[0].id, 70000);
	assert_int_equal(t.ids[0].count, 2);
	assert_int_equal(t.ids[1].kind, SI_KGID);
	assert_int_equal(t.nr_examples, 2);
	assert_string_equal(t.examples[0], "a/file");

	rules(SHIFTIMG_UNMAPPED_OVERFLOW, false);
	assert_int_equal(si_shift_id(&r, SI_KUID, 70000, &id, &t),
			 SI_UNMAPPED | SI_CHANGED);
	assert_int_equal(id, SHIFTIMG_OVERFLOW_ID);
	/* A v3 capability whose root is unmapped: overflow root, or kept. */
	cap(in, 0x03000000, 80000);
	assert_int_equal(si_cap(&r, in, 24, out, &olen, &t), SI_UNMAPPED | SI_CHANGED);
	assert_int_equal(get32(out + 20), SHIFTIMG_OVERFLOW_ID);
	rules(SHIFTIMG_UNMAPPED_KEEP, false);
	assert_int_equal(si_cap(&r, in, 24, out, &olen, &t), SI_UNMAPPED);
	assert_memory_equal(in, out, 24);
}

static void test_override_stat(void **state)
{
	char out[64 + SI_OVERRIDE_GROW];
	size_t olen;

	rules(SHIFTIMG_UNMAPPED_FAIL, false);
	assert_int_equal(si_override_stat(&r, "0:0:0755", 8, out, &olen, &t), SI_CHANGED);
	assert_int_equal(olen, 18);
	assert_memory_equal(out, "100000:100000:0755", 18);
	assert_int_equal(si_override_stat(&r, "1000:5:0644:file", 16, out, &olen, &t),
			 SI_CHANGED);
	assert_memory_equal(out, "101000:100005:0644:file", olen);
	rules(SHIFTIMG_UNMAPPED_FAIL, true);
	assert_int_equal(si_override_stat(&r, "165535:100000:01777:dir", 23, out, &olen, &t),
			 SI_CHANGED);
	assert_memory_equal(out, "65535:0:01777:dir", olen);

	static const char *const bad[] = {
		"", ":", "0", "0:", "0:0", "a:0:0755", "0:b:0755", "-1:0:0755",
		"12345678901:0:0755", "4294967295:0:0755", " 0:0:0755",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(si_override_stat(&r, bad[i], strlen(bad[i]), out,
						  &olen, &t), -EINVAL);
}

static void test_xattr_dispatch(void **state)
{
	unsigned char in[24], out[SI_XATTR_OUT(24)];
	size_t olen = 77;

	rules(SHIFTIMG_UNMAPPED_FAIL, false);
	assert_int_equal(si_xattr_kind("system.posix_acl_default"), SI_XA_ACL);
	assert_int_equal(si_xattr_kind("security.capability"), SI_XA_CAP);
	assert_int_equal(si_xattr_kind("user.containers.override_stat"), SI_XA_OVERRIDE);
	assert_int_equal(si_xattr_kind("trusted.overlay.opaque"), SI_XA_NONE);
	assert_int_equal(si_xattr_kind("security.capability2"), SI_XA_NONE);
	assert_int_equal(si_xattr(&r, "user.other", in, 3, out, &olen, &t), 0);
	cap(in, 0x02000000, 0);
	assert_int_equal(si_xattr(&r, "security.capability", in, 20, out, &olen, &t),
			 SI_CHANGED);
	assert_int_equal(olen, 24);
	assert_int_equal(si_xattr(&r, "system.posix_acl_access", in, 20, out, &olen, &t),
			 -EINVAL);
	assert_int_equal(olen, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_acl_xattr),
		cmocka_unit_test(test_acl_malformed),
		cmocka_unit_test(test_acl_ext4),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_cap_malformed),
		cmocka_unit_test(test_unmapped_policies),
		cmocka_unit_test(test_override_stat),
		cmocka_unit_test(test_xattr_dispatch),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	si_tally_free(&t);
	return rc;
}
