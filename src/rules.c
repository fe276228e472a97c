// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The shifting rules.  Each function reads a value, validates all of it
 * before writing anything, and reports SI_CHANGED/SI_UNMAPPED.  The
 * rules are the kernel's idmapped-mount view (fs/posix_acl.c,
 * security/commoncap.c): what an idmapped mount would show is what we
 * write.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "rules.h"
#include "le.h"

int si_shift_id(const struct si_rules *r, enum si_kind kind, uint32_t id,
		uint32_t *out, struct si_tally *t)
{
	uint32_t to;

	if (si_idmap_lookup(&r->map[kind], id, &to)) {
		*out = to;
		return to != id ? SI_CHANGED : 0;
	}
	if (t)
		si_tally_id(t, kind, id);
	if (r->unmapped == SHIFTIMG_UNMAPPED_OVERFLOW) {
		*out = SHIFTIMG_OVERFLOW_ID;
		return SI_UNMAPPED | (id != SHIFTIMG_OVERFLOW_ID ? SI_CHANGED : 0);
	}
	*out = id;
	return SI_UNMAPPED;
}

/* ---- POSIX ACLs ---- */

/* Tags, as in <linux/posix_acl.h>; only USER and GROUP carry an id. */
#define ACL_USER_OBJ	0x01
#define ACL_USER	0x02
#define ACL_GROUP_OBJ	0x04
#define ACL_GROUP	0x08
#define ACL_MASK	0x10
#define ACL_OTHER	0x20

#define ACL_XATTR_VERSION	2
#define ACL_EXT4_VERSION	1

static bool acl_tag_valid(uint16_t tag)
{
	switch (tag) {
	case ACL_USER_OBJ: case ACL_USER: case ACL_GROUP_OBJ:
	case ACL_GROUP: case ACL_MASK: case ACL_OTHER:
		return true;
	}
	return false;
}

/* Shifts the qualifier at p (4 bytes) of an entry tagged tag. */
static int acl_entry(const struct si_rules *r, uint16_t tag,
		     const unsigned char *in, unsigned char *out,
		     struct si_tally *t)
{
	enum si_kind kind = tag == ACL_USER ? SI_KUID : SI_KGID;
	uint32_t id;
	int res;

	res = si_shift_id(r, kind, get32(in), &id, t);
	put32(out, id);
	return res;
}

int si_acl_xattr(const struct si_rules *r, const void *in, size_t len,
		 void *out, struct si_tally *t)
{
	const unsigned char *p = in;
	unsigned char *o = out;
	size_t off;
	int res = 0;

	if (len < 4 || (len - 4) % 8 || get32(p) != ACL_XATTR_VERSION)
		return -EINVAL;
	for (off = 4; off < len; off += 8)
		if (!acl_tag_valid(get16(p + off)))
			return -EINVAL;

	memmove(o, p, len);
	for (off = 4; off < len; off += 8) {
		uint16_t tag = get16(p + off);

		if (tag == ACL_USER || tag == ACL_GROUP)
			res |= acl_entry(r, tag, o + off + 4, o + off + 4, t);
	}
	return res;
}

/*
 * ext4 keeps ACLs compact: 4-byte entries for the tags without an id,
 * 8-byte ones for ACL_USER and ACL_GROUP.
 */
static int ext4_acl_walk(const unsigned char *p, size_t len)
{
	size_t off = 4;

	if (len < 4 || get32(p) != ACL_EXT4_VERSION)
		return -EINVAL;
	while (off < len) {
		uint16_t tag;

		if (len - off < 4)
			return -EINVAL;
		tag = get16(p + off);
		if (!acl_tag_valid(tag))
			return -EINVAL;
		off += (tag == ACL_USER || tag == ACL_GROUP) ? 8 : 4;
		if (off > len)
			return -EINVAL;
	}
	return 0;
}

int si_acl_ext4(const struct si_rules *r, const void *in, size_t len,
		void *out, struct si_tally *t)
{
	const unsigned char *p = in;
	unsigned char *o = out;
	size_t off = 4;
	int res = 0;

	if (ext4_acl_walk(p, len) < 0)
		return -EINVAL;
	memmove(o, p, len);
	while (off < len) {
		uint16_t tag = get16(o + off);

		if (tag == ACL_USER || tag == ACL_GROUP) {
			res |= acl_entry(r, tag, o + off + 4, o + off + 4, t);
			off += 8;
		} else {
			off += 4;
		}
	}
	return res;
}

/* ---- security.capability ---- */

#define CAP_REV_MASK	0xff000000u
#define CAP_REV1	0x01000000u
#define CAP_REV2	0x02000000u
#define CAP_REV3	0x03000000u
#define CAP_SZ1		12
#define CAP_SZ2		20
#define CAP_SZ3		24

/*
 * v1 and v2 belong to the filesystem's root (rootid 0); v3 names its
 * root.  Through an idmapped mount the kernel shows every value as v3
 * with rootid map(rootid), and as v2 when that is 0.  v1 holds only the
 * low 32 capability bits: the high words of the v3 value are zero.
 */
int si_cap(const struct si_rules *r, const void *in, size_t len, void *out,
	   size_t *outlen, struct si_tally *t)
{
	const unsigned char *p = in;
	unsigned char *o = out;
	uint32_t magic, rev, rootid = 0, to;
	int res;

	if (len < 4)
		return -EINVAL;
	magic = get32(p);
	rev = magic & CAP_REV_MASK;
	if (!((rev == CAP_REV1 && len == CAP_SZ1) ||
	      (rev == CAP_REV2 && len == CAP_SZ2) ||
	      (rev == CAP_REV3 && len == CAP_SZ3)))
		return -EINVAL;
	if (rev == CAP_REV3)
		rootid = get32(p + 20);

	res = si_shift_id(r, SI_KUID, rootid, &to, t);
	if (!(res & SI_CHANGED)) {
		memmove(o, p, len);
		*outlen = len;
		return res;
	}
	if (to == 0) {
		unsigned char v2[CAP_SZ2];

		memcpy(v2, p, CAP_SZ2);
		put32(v2, (magic & ~CAP_REV_MASK) | CAP_REV2);
		memcpy(o, v2, CAP_SZ2);
		*outlen = CAP_SZ2;
		return res;
	}

	unsigned char v3[CAP_SZ3] = { 0 };

	memcpy(v3, p, len < CAP_SZ2 ? len : CAP_SZ2);
	put32(v3, (magic & ~CAP_REV_MASK) | CAP_REV3);
	put32(v3 + 20, to);
	memcpy(o, v3, CAP_SZ3);
	*outlen = CAP_SZ3;
	return res;
}

/* ---- user.containers.override_stat ---- */

/* Parses a decimal id ending at ':'; returns its length or -1. */
static int parse_id(const char *s, size_t len, uint32_t *id)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < len && s[i] != ':'; i++) {
		if (s[i] < '0' || s[i] > '9' || i == 10)
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (i == 0 || i == len || v > SI_ID_MAX)
		return -1;
	*id = (uint32_t)v;
	return (int)i;
}

int si_override_stat(const struct si_rules *r, const void *in, size_t len,
		     void *out, size_t *outlen, struct si_tally *t)
{
	const char *s = in;
	uint32_t uid, gid, nuid, ngid;
	int ul, gl, res;
	char ids[32];
	int n;

	ul = parse_id(s, len, &uid);
	if (ul < 0)
		return -EINVAL;
	gl = parse_id(s + ul + 1, len - (size_t)ul - 1, &gid);
	if (gl < 0)
		return -EINVAL;

	res = si_shift_id(r, SI_KUID, uid, &nuid, t);
	res |= si_shift_id(r, SI_KGID, gid, &ngid, t);
	n = snprintf(ids, sizeof(ids), "%u:%u", nuid, ngid);

	/* The tail (":mode[:type]") is copied as it is. */
	size_t tail = len - (size_t)ul - 1 - (size_t)gl;

	memmove((char *)out + n, s + ul + 1 + gl, tail);
	memcpy(out, ids, (size_t)n);
	*outlen = (size_t)n + tail;
	return res;
}

/* ---- privilege ---- */

bool si_rules_make_root(const struct si_rules *r)
{
	unsigned int k, i;

	for (k = 0; k < 2; k++) {
		for (i = 0; i < r->map[k].nr; i++) {
			const struct si_extent *e = &r->map[k].ext[i];

			/* Some first+j with first+j != 0 lands on target+j == 0. */
			if (e->target == 0 && e->first != 0)
				return true;
		}
	}
	return false;
}

/*
 * The kernel's exec rules (fs/exec.c, bprm_fill_uid): setuid takes
 * effect on any executable regular file, setgid only with group
 * execute (without it the bit means mandatory locking).
 */
int si_grants_root(mode_t mode, uint32_t uid, uint32_t gid, uint32_t new_uid,
		   uint32_t new_gid)
{
	int bits = 0;

	if (!S_ISREG(mode) || !(mode & 0111))
		return 0;
	if ((mode & S_ISUID) && new_uid == 0 && uid != 0)
		bits |= SI_PRIV_SETUID;
	if ((mode & S_ISGID) && (mode & S_IXGRP) && new_gid == 0 && gid != 0)
		bits |= SI_PRIV_SETGID;
	return bits;
}

/* The user whose root the value names: v3's rootid, else the fs's root. */
static bool cap_rootid(const unsigned char *p, size_t len, uint32_t *rootid)
{
	uint32_t rev;

	if (len < 4)
		return false;
	rev = get32(p) & CAP_REV_MASK;
	if ((rev == CAP_REV1 && len == CAP_SZ1) ||
	    (rev == CAP_REV2 && len == CAP_SZ2)) {
		*rootid = 0;
		return true;
	}
	if (rev == CAP_REV3 && len == CAP_SZ3) {
		*rootid = get32(p + 20);
		return true;
	}
	return false;
}

int si_cap_grants_root(const void *in, size_t inlen, const void *out,
		       size_t outlen)
{
	uint32_t before, after;

	if (!cap_rootid(in, inlen, &before) || !cap_rootid(out, outlen, &after))
		return 0;
	return before != 0 && after == 0 ? SI_PRIV_CAP : 0;
}

const char *si_priv_name(int bits)
{
	static const char *const names[8] = {
		"", "setuid root", "setgid root", "setuid and setgid root",
		"root capabilities", "setuid root, root capabilities",
		"setgid root, root capabilities",
		"setuid and setgid root, root capabilities",
	};

	return names[bits & 7];
}

/* ---- dispatch by xattr name ---- */

enum si_xattr_kind si_xattr_kind(const char *name)
{
	if (!strcmp(name, "system.posix_acl_access") ||
	    !strcmp(name, "system.posix_acl_default"))
		return SI_XA_ACL;
	if (!strcmp(name, "security.capability"))
		return SI_XA_CAP;
	if (!strcmp(name, "user.containers.override_stat"))
		return SI_XA_OVERRIDE;
	return SI_XA_NONE;
}

int si_xattr(const struct si_rules *r, const char *name, const void *in,
	     size_t len, void *out, size_t *outlen, struct si_tally *t)
{
	int res;

	switch (si_xattr_kind(name)) {
	case SI_XA_ACL:
		res = si_acl_xattr(r, in, len, out, t);
		*outlen = len;
		break;
	case SI_XA_CAP:
		res = si_cap(r, in, len, out, outlen, t);
		break;
	case SI_XA_OVERRIDE:
		res = si_override_stat(r, in, len, out, outlen, t);
		break;
	default:
		return 0;
	}
	if (res < 0)
		*outlen = 0;
	return res;
}
