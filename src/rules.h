/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The shifting rules, once, as pure functions on buffers.
 *
 * They follow the kernel's idmapped-mount rules: an object shifted here
 * and read plainly looks like the original read through an idmapped
 * mount whose user namespace carries the same map.  Nothing here does
 * I/O; every backend (tree, ext4, tar) calls these and nothing else to
 * decide what an id becomes.
 */
#ifndef SHIFTIMG_RULES_H
#define SHIFTIMG_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shiftimg.h"

/* The kernel allows 340 extents in a uid_map; so do we, in a map given. */
#define SI_MAP_MAX	340
/* Two such maps composed (--from-map) split into at most twice as many. */
#define SI_MAP_EXTENTS	(2 * SI_MAP_MAX)
/* The largest valid id: (uid_t)-1 is "no id". */
#define SI_ID_MAX	0xfffffffeu

enum si_kind { SI_KUID = 0, SI_KGID = 1 };

struct si_extent {
	uint32_t first;		/* first id in the source space */
	uint32_t target;	/* what first becomes */
	uint32_t count;
};

/* One direction of one map, sorted by first for lookup. */
struct si_idmap {
	unsigned int nr;
	struct si_extent ext[SI_MAP_EXTENTS];
};

/* Everything a rule needs: both maps in the run's direction, the policy. */
struct si_rules {
	struct si_idmap map[2];		/* [SI_KUID], [SI_KGID] */
	enum shiftimg_unmapped unmapped;
};

/*
 * Unmapped ids seen, kept small: which ids (the first SI_TALLY_IDS
 * distinct ones with their counts), how many objects, a few paths.
 */
#define SI_TALLY_IDS		32
#define SI_TALLY_EXAMPLES	5

struct si_tally_id {
	uint32_t id;
	uint8_t kind;		/* enum si_kind */
	uint64_t count;
};

struct si_tally {
	struct shiftimg_stats st;
	unsigned int nr_ids;
	uint64_t more_ids;	/* distinct unmapped ids beyond nr_ids */
	struct si_tally_id ids[SI_TALLY_IDS];
	unsigned int nr_examples;
	char *examples[SI_TALLY_EXAMPLES];
	uint64_t privileged;	/* objects the shift would make grant root */
	unsigned int nr_priv;
	char *priv[SI_TALLY_EXAMPLES];	/* the smallest of their paths */
	bool pending;		/* an id of the current object was unmapped */
};

/* Results of a rule; a bit set. */
#define SI_CHANGED	(1 << 0)	/* the output differs from the input */
#define SI_UNMAPPED	(1 << 1)	/* an id was not covered by the map */

/* ---- maps (map.c) ---- */

/* Inserts a range, refusing zero counts, overflow and overlaps. */
int si_idmap_add(struct si_idmap *m, uint64_t first, uint64_t target,
		 uint64_t count, char *err, size_t errlen);
/* The inverse of a map (for --reverse). */
void si_idmap_invert(const struct si_idmap *m, struct si_idmap *inv);
/*
 * Re-shifting (--from-map): a target shifted with map from must be
 * shifted with map to.  out sends from's outside ids to to's outside
 * ids through the inside id they share (old host id -> container id ->
 * new host id); an id that either map leaves out is not in out.
 */
void si_idmap_compose(const struct si_idmap *from, const struct si_idmap *to,
		      struct si_idmap *out);
/*
 * Adds to m the identity on every id outside the outside ranges of
 * from (the ids a from-map does not hold are kept).  Returns 0, or -1
 * if m would have too many extents.
 */
int si_idmap_keep_outside(struct si_idmap *m, const struct si_idmap *from);
/* Looks id up; returns true and sets *out when a range covers it. */
bool si_idmap_lookup(const struct si_idmap *m, uint32_t id, uint32_t *out);
bool si_idmap_is_identity(const struct si_idmap *m);

/* ---- single ids (rules.c) ---- */

/*
 * Shifts one id by the policy.  Returns SI_CHANGED and/or SI_UNMAPPED.
 * An unmapped id is recorded in t (if not NULL) and, under the "fail"
 * and "keep" policies, left as it is.
 */
int si_shift_id(const struct si_rules *r, enum si_kind kind, uint32_t id,
		uint32_t *out, struct si_tally *t);

/* ---- xattr values (rules.c) ---- */

/* POSIX ACL in the VFS xattr format (version 2): same length out. */
int si_acl_xattr(const struct si_rules *r, const void *in, size_t len,
		 void *out, struct si_tally *t);
/* POSIX ACL in ext4's on-disk format (version 1): same length out. */
int si_acl_ext4(const struct si_rules *r, const void *in, size_t len,
		void *out, struct si_tally *t);

/* security.capability: v1/v2 grow to v3 (24 bytes); out must hold 24. */
#define SI_CAP_MAX	24
int si_cap(const struct si_rules *r, const void *in, size_t len, void *out,
	   size_t *outlen, struct si_tally *t);

/*
 * user.containers.override_stat "uid:gid:mode[:type]": the ids change,
 * the rest is copied; out must hold len + SI_OVERRIDE_GROW bytes.
 */
#define SI_OVERRIDE_GROW 20
int si_override_stat(const struct si_rules *r, const void *in, size_t len,
		     void *out, size_t *outlen, struct si_tally *t);

/* Which rule an xattr name needs; SI_XA_NONE for values left alone. */
enum si_xattr_kind {
	SI_XA_NONE = 0,
	SI_XA_ACL,		/* system.posix_acl_access / _default */
	SI_XA_CAP,		/* security.capability */
	SI_XA_OVERRIDE,		/* user.containers.override_stat */
};
enum si_xattr_kind si_xattr_kind(const char *name);

/*
 * Shifts an xattr value given its full name, in VFS format.  out must
 * hold SI_XATTR_OUT(len) bytes.
 * Returns SI_CHANGED/SI_UNMAPPED bits, 0 for names left alone, or
 * -EINVAL for a malformed value (nothing is written then).
 */
int si_xattr(const struct si_rules *r, const char *name, const void *in,
	     size_t len, void *out, size_t *outlen, struct si_tally *t);
#define SI_XATTR_OUT(len) ((len) + SI_CAP_MAX)

/* ---- privilege (rules.c) ---- */

/*
 * Unshifting (--reverse, or any map sending a non-root id to 0) turns
 * a container's files into real root's.  These say when a shift would
 * hand out root that the object did not grant before, so that the run
 * can refuse unless SHIFTIMG_ALLOW_PRIVILEGED.
 */
#define SI_PRIV_SETUID	(1 << 0)	/* setuid executable, owner becomes 0 */
#define SI_PRIV_SETGID	(1 << 1)	/* setgid executable, group becomes 0 */
#define SI_PRIV_CAP	(1 << 2)	/* file capability whose root becomes 0 */

/* True if either map sends a non-zero id to 0: only then can root appear. */
bool si_rules_make_root(const struct si_rules *r);
/*
 * SI_PRIV_SETUID/SETGID bits for an object of this mode (type included)
 * whose ids go from uid:gid to new_uid:new_gid; 0 if it grants nothing new.
 */
int si_grants_root(mode_t mode, uint32_t uid, uint32_t gid, uint32_t new_uid,
		   uint32_t new_gid);
/*
 * SI_PRIV_CAP if the security.capability value in (as read) grants a
 * non-root user's capabilities and out (as si_cap() made it) grants real
 * root's: v1/v2, or v3 with rootid 0.  0 otherwise or if in is malformed.
 */
int si_cap_grants_root(const void *in, size_t inlen, const void *out,
		       size_t outlen);
/* "setuid root", "setgid root, root capability", ... for messages. */
const char *si_priv_name(int bits);

/* ---- tallies (tally.c) ---- */

void si_tally_init(struct si_tally *t);
void si_tally_free(struct si_tally *t);
/* Records an unmapped id of the current object. */
void si_tally_id(struct si_tally *t, enum si_kind kind, uint32_t id);
/*
 * Closes the current object: if any of its ids was unmapped, counts it
 * and keeps path as an example.  Backends call it once per object.
 */
void si_tally_object(struct si_tally *t, const char *path);
/* Counts an object that would grant root and keeps path as an example. */
void si_tally_privileged(struct si_tally *t, const char *path);
/* Adds src into dst (for per-thread tallies). */
void si_tally_merge(struct si_tally *dst, const struct si_tally *src);

#endif /* SHIFTIMG_RULES_H */
