/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libshiftimg: shift the ownership of container filesystems offline.
 *
 * A handle carries the id maps, the options, the statistics of the last
 * run and the last error.  Every function that can fail returns 0 or a
 * negative errno and leaves a message on the handle (shiftimg_error()).
 * The library never prints and never exits.
 */
#ifndef SHIFTIMG_H
#define SHIFTIMG_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct shiftimg;

/* Which id space a map range applies to. */
#define SHIFTIMG_UID		(1u << 0)
#define SHIFTIMG_GID		(1u << 1)
#define SHIFTIMG_BOTH		(SHIFTIMG_UID | SHIFTIMG_GID)
/*
 * With the kinds: the range belongs to the map the target is shifted
 * with now (--from-map), not to the map it is to be shifted with.
 */
#define SHIFTIMG_FROM		(1u << 2)
/* shiftimg_map_format(): the map the last run applied to the ids on disk. */
#define SHIFTIMG_APPLIED	(1u << 3)

/* What to do with an id that no range covers. */
enum shiftimg_unmapped {
	SHIFTIMG_UNMAPPED_FAIL = 0,	/* refuse before changing anything */
	SHIFTIMG_UNMAPPED_KEEP,		/* leave the id as it is */
	SHIFTIMG_UNMAPPED_OVERFLOW,	/* 65534, as the kernel shows it */
};

/* Run flags. */
#define SHIFTIMG_REVERSE	(1ull << 0)	/* apply the inverse map */
#define SHIFTIMG_DRY_RUN	(1ull << 1)	/* count and list, change nothing */
#define SHIFTIMG_CROSS_MOUNTS	(1ull << 2)	/* tree: descend into other mounts */
#define SHIFTIMG_FORCE		(1ull << 3)	/* ignore the "already shifted" stamp */
#define SHIFTIMG_NAMES_KEEP	(1ull << 4)	/* tar: keep uname/gname */
#define SHIFTIMG_ALLOW_PRIVILEGED (1ull << 5)	/* allow producing root setuid/caps */
#define SHIFTIMG_STAMP		(1ull << 6)	/* record a finished shift in the target */
#define SHIFTIMG_DIGEST		(1ull << 7)	/* tar: sha256 of the output, diff_id */
#define SHIFTIMG_SYNC		(1ull << 8)	/* tree: return once the shift is on disk */
#define SHIFTIMG_KEEP_BLOBS	(1ull << 9)	/* OCI layout: keep blobs no longer used */

/* The overflow id the kernel shows for unmapped ids. */
#define SHIFTIMG_OVERFLOW_ID	65534u

/* Counts of the last run; a dry run counts what would change. */
struct shiftimg_stats {
	uint64_t objects;	/* inodes (or tar entries) visited */
	uint64_t changed;	/* objects whose owner or ids changed */
	uint64_t hardlinks;	/* extra names of already-visited inodes */
	uint64_t acls;		/* ACL xattrs rewritten */
	uint64_t caps;		/* security.capability values rewritten */
	uint64_t override_stat;	/* user.containers.override_stat rewritten */
	uint64_t flags_cleared;	/* immutable/append-only cleared and restored */
	uint64_t unmapped;	/* objects holding at least one unmapped id */
	uint64_t skipped_mounts; /* mount points not descended into */
	uint64_t errors;	/* objects that could not be shifted */
	double seconds;
};

/* Called for each object that changes (or would, in a dry run). */
typedef void shiftimg_list_fn(void *arg, const char *path, const char *what);
/* Called now and then during long runs; total is 0 when unknown. */
typedef void shiftimg_progress_fn(void *arg, uint64_t done, uint64_t total);

struct shiftimg *shiftimg_new(void);
void shiftimg_free(struct shiftimg *h);

/* The last error, or "" if there was none. */
const char *shiftimg_error(const struct shiftimg *h);

/*
 * Maps.  shiftimg_map_parse() takes "I:O:N" for the kinds given, or
 * fuidshift's "u:I:O:N", "g:I:O:N", "b:I:O:N" (which override the id
 * kinds, not SHIFTIMG_FROM).
 * shiftimg_map_load() reads /proc/PID/uid_map text ("I O N" lines).
 * shiftimg_map_subid() maps container root to the first subordinate id
 * of USER (a name or a number) from the subuid and subgid files
 * (NULL for /etc/subuid and /etc/subgid), for the id kinds given.
 *
 * With SHIFTIMG_FROM in kinds, the ranges make the map the target has
 * now: the run then applies the map composed of its inverse and the
 * map to shift with (old host id -> container id -> new host id).
 */
int shiftimg_map_add(struct shiftimg *h, unsigned int kinds, uint64_t inside,
		     uint64_t outside, uint64_t count);
int shiftimg_map_parse(struct shiftimg *h, unsigned int kinds, const char *spec);
int shiftimg_map_load(struct shiftimg *h, unsigned int kinds, const char *path);
int shiftimg_map_subid(struct shiftimg *h, unsigned int kinds, const char *user,
		       const char *subuid_path, const char *subgid_path);
/*
 * Writes a map as "u:I:O:N g:I:O:N ..." into buf; returns the length.
 * which: 0 for the map to shift with, SHIFTIMG_FROM for the map the
 * target has now, SHIFTIMG_APPLIED for what the last run did to the
 * ids on disk (the composed map, inverted by --reverse; a kind it left
 * alone is not written).
 */
int shiftimg_map_format(const struct shiftimg *h, unsigned int which,
			char *buf, size_t size);

void shiftimg_set_flags(struct shiftimg *h, uint64_t flags);
uint64_t shiftimg_get_flags(const struct shiftimg *h);
void shiftimg_set_unmapped(struct shiftimg *h, enum shiftimg_unmapped policy);
/* Worker threads for backends that can use them; 0 picks one per core. */
void shiftimg_set_threads(struct shiftimg *h, unsigned int threads);
void shiftimg_set_list(struct shiftimg *h, shiftimg_list_fn *fn, void *arg);
void shiftimg_set_progress(struct shiftimg *h, shiftimg_progress_fn *fn, void *arg);

/*
 * Generic string options for backends ("output", "offset", "journal",
 * "compress-level", ...).  Unknown keys are refused by the backend that
 * would have used them, so a typo never goes unnoticed.
 */
int shiftimg_set_option(struct shiftimg *h, const char *key, const char *value);

/*
 * Shift one target: a directory tree, an ext2/3/4 image or a tarball;
 * "-" is a tarball on standard input written to standard output.
 * The backend is chosen from what the target is.
 */
int shiftimg_run(struct shiftimg *h, const char *target);

/*
 * A note on how the last run went when it was not an ordinary shift
 * ("already shifted with this map; nothing done", "finished an
 * interrupted run", "the journal is kept"), or "".
 */
const char *shiftimg_notice(const struct shiftimg *h);

/*
 * An in-place run left unfinished (its journal, shiftimg-journal(5)):
 * shiftimg_status() writes what it did and what the target holds now;
 * shiftimg_rollback() restores the target as it was before that run
 * and removes the journal.  Neither needs a map: the journal has it.
 */
int shiftimg_status(struct shiftimg *h, const char *target, FILE *out);
int shiftimg_rollback(struct shiftimg *h, const char *target);

/* Name of the backend the last shiftimg_run() used ("tree", "ext4", ...). */
const char *shiftimg_backend(const struct shiftimg *h);
const struct shiftimg_stats *shiftimg_stats(const struct shiftimg *h);
/*
 * The i-th distinct unmapped id of the last run: kind is SHIFTIMG_UID or
 * SHIFTIMG_GID, count its occurrences.  Returns -ENOENT past the last.
 */
int shiftimg_unmapped_id(const struct shiftimg *h, unsigned int i,
			 unsigned int *kind, uint32_t *id, uint64_t *count);
/*
 * Digests of the last tar run, "sha256:<hex>": which is "output" (the
 * file written) or "diff_id" (the uncompressed tar, an OCI layer's
 * diff_id).  Computed in the same pass when SHIFTIMG_DIGEST is set;
 * NULL otherwise, and for targets that are not tarballs.
 */
const char *shiftimg_digest(const struct shiftimg *h, const char *which);
/* Writes the unmapped-id report of the last run (ids, counts, examples). */
void shiftimg_unmapped_report(const struct shiftimg *h, FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* SHIFTIMG_H */
