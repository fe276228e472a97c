// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The xattr codecs (VFS and ext4 ACLs, security.capability,
 * user.containers.override_stat) on hostile values.  The first byte
 * picks the codec, the policy, the direction and in-place or not; the
 * rest is the value.  Output buffers are exactly as large as rules.h
 * promises, so AddressSanitizer sees any write past them.  Checked:
 * malformed values write nothing, ACLs keep their length and shift back
 * to what they were, nothing grows past its documented bound.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"

#define POISON 0xa5

enum codec { ACL_VFS, ACL_EXT4, CAP, OVERRIDE, XATTR, NR_CODECS };

static const char *const names[] = {
	"system.posix_acl_access", "system.posix_acl_default",
	"security.capability", "user.containers.override_stat", "user.other",
	"trusted.overlay.origin",
};

/* 0:100000:65536 and 3000000:100:1000, both kinds, or their inverse. */
static void make_rules(struct si_rules *r, bool reverse,
		       enum shiftimg_unmapped policy)
{
	struct si_idmap m = { 0 };
	char err[128];
	int k;

	memset(r, 0, sizeof(*r));
	if (si_idmap_add(&m, 0, 100000, 65536, err, sizeof(err)) ||
	    si_idmap_add(&m, 3000000, 100, 1000, err, sizeof(err)))
		abort();
	for (k = 0; k < 2; k++) {
		if (reverse)
			si_idmap_invert(&m, &r->map[k]);
		else
			r->map[k] = m;
	}
	r->unmapped = policy;
}

static int run(const struct si_rules *r, enum codec c, const char *name,
	       const void *in, size_t len, void *out, size_t *outlen,
	       struct si_tally *t)
{
	int res;

	switch (c) {
	case ACL_VFS:
		*outlen = len;
		return si_acl_xattr(r, in, len, out, t);
	case ACL_EXT4:
		*outlen = len;
		return si_acl_ext4(r, in, len, out, t);
	case CAP:
		return si_cap(r, in, len, out, outlen, t);
	case OVERRIDE:
		return si_override_stat(r, in, len, out, outlen, t);
	default:
		res = si_xattr(r, name, in, len, out, outlen, t);
		if (res == 0 && si_xattr_kind(name) == SI_XA_NONE)
			*outlen = 0;
		return res;
	}
}

static size_t out_size(enum codec c, size_t len)
{
	switch (c) {
	case ACL_VFS:
	case ACL_EXT4:
		return len;
	case CAP:
		return SI_CAP_MAX > len ? SI_CAP_MAX : len;
	case OVERRIDE:
		return len + SI_OVERRIDE_GROW;
	default:
		return SI_XATTR_OUT(len);
	}
}

static bool untouched(const unsigned char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != POISON)
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct si_rules r, back;
	struct si_tally t;
	enum codec c;
	const char *name;
	unsigned char *out, *again;
	size_t len, osz, outlen = 0, len2 = 0;
	bool reverse, in_place;
	int res, res2;

	if (size < 1)
		return 0;
	c = (enum codec)(data[0] % NR_CODECS);
	name = names[(data[0] >> 3) % (sizeof(names) / sizeof(names[0]))];
	reverse = data[0] & 0x40;
	in_place = data[0] & 0x80;
	make_rules(&r, reverse, (enum shiftimg_unmapped)((data[0] >> 4) % 3));
	make_rules(&back, !reverse, SHIFTIMG_UNMAPPED_KEEP);
	data++;
	len = size - 1;

	osz = out_size(c, len);
	out = malloc(osz ? osz : 1);
	if (!out)
		abort();
	memset(out, POISON, osz);
	si_tally_init(&t);
	if (in_place) {
		/* Backends that rewrite an area in place pass one buffer. */
		memcpy(out, data, len);
		res = run(&r, c, name, out, len, out, &outlen, &t);
	} else {
		res = run(&r, c, name, data, len, out, &outlen, &t);
		if (res < 0 && !untouched(out, osz))
			abort();	/* a refused value must write nothing */
	}
	si_tally_object(&t, "fuzz");
	if (res >= 0 && outlen > osz)
		abort();
	if (res >= 0 && (c == CAP || (c == XATTR &&
	    si_xattr_kind(name) == SI_XA_CAP)) && outlen > SI_CAP_MAX)
		abort();
	si_cap_grants_root(data, len, out, res >= 0 ? outlen : 0);

	/* What shifted cleanly shifts back; ACLs to the same bytes. */
	if (res >= 0 && !(res & SI_UNMAPPED) && !in_place &&
	    (c == ACL_VFS || c == ACL_EXT4 || c == OVERRIDE)) {
		again = malloc(out_size(c, outlen) + 1);
		if (!again)
			abort();
		res2 = run(&back, c, name, out, outlen, again, &len2, NULL);
		if (res2 < 0)
			abort();
		if (c != OVERRIDE && (len2 != len || memcmp(again, data, len)))
			abort();
		free(again);
	}
	si_tally_free(&t);
	free(out);
	return 0;
}
