/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The handle, as the backends see it. */
#ifndef SHIFTIMG_INT_H
#define SHIFTIMG_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "shiftimg.h"
#include "rules.h"

struct si_backend;
struct si_journal;

struct si_option {
	char *key;
	char *value;
};

#define SI_DIGEST_LEN	(7 + 64 + 1)	/* "sha256:", hex, NUL */

/* Directories by (device, inode), sorted. */
struct si_dir_id {
	uint64_t dev, ino;
};

struct si_dirs {
	struct si_dir_id *id;
	size_t nr;
};

static inline int si_dir_id_cmp(const struct si_dir_id *a, const struct si_dir_id *b)
{
	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	return a->ino < b->ino ? -1 : a->ino > b->ino;
}

static inline bool si_dirs_has(const struct si_dirs *d, uint64_t dev, uint64_t ino)
{
	struct si_dir_id key = { dev, ino };
	size_t lo = 0, hi = d->nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = si_dir_id_cmp(&d->id[mid], &key);

		if (!c)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

struct shiftimg {
	/* The maps as given, inside -> outside; have[k] if any range. */
	struct si_idmap given[2];
	bool have[2];
	/* The map the target has now (--from-map), the same way. */
	struct si_idmap from[2];
	bool have_from[2];
	struct si_rules rules;		/* built by shiftimg_run() */
	uint64_t flags;
	unsigned int threads;

	shiftimg_list_fn *list_fn;
	void *list_arg;
	shiftimg_progress_fn *progress_fn;
	void *progress_arg;
	pthread_mutex_t lock;		/* list_fn and progress_fn calls */

	struct si_option *opts;
	size_t nr_opts;

	const struct si_backend *backend;
	struct si_journal *journal;	/* the run's journal, or NULL */
	struct si_tally tally;
	struct si_tally checked;	/* the check pass's, kept for the apply pass */
	uint64_t planned;		/* objects the check pass saw, 0 if none */
	/* What a backend's check pass leaves its apply pass; freed after the run. */
	void *pass_state;
	void (*pass_state_free)(void *);
	/*
	 * A rootful store's run (src/store.c): host ids outside the
	 * from-map's ranges are kept, and the directories in skip hold
	 * container ids and are not walked.
	 */
	bool keep_outside;
	const struct si_dirs *skip;
	/* Run once the target is shifted, before its journal goes (src/lxc.c). */
	int (*commit_fn)(struct shiftimg *h, void *arg);
	void *commit_arg;
	char err[1024];
	char notice[1024];		/* what the run found (shiftimg_notice) */
	/* "sha256:<hex>" of a tar run's output and uncompressed tar, or "". */
	char digest_output[SI_DIGEST_LEN];
	char digest_diff_id[SI_DIGEST_LEN];
};

/*
 * A handle for one part of a whole run on another thread (a layer of an
 * image): the parent's maps, rules, flags and options, its own tally,
 * error and lock; the list and progress callbacks only if callbacks
 * (the parts then run one at a time).  NULL if out of memory.
 */
struct shiftimg *si_handle_fork(const struct shiftimg *h, bool callbacks);
void si_handle_fork_free(struct shiftimg *c);

/*
 * Sets the handle's error and returns -err (err is a positive errno).
 * The first error of a run wins: later ones are usually its echoes.
 */
int si_error(struct shiftimg *h, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Clears the error (the start of a run). */
void si_error_clear(struct shiftimg *h);
bool si_has_error(const struct shiftimg *h);

/*
 * Refuses a run whose tally holds unmapped ids (--unmapped=fail): the
 * message says which ids, how many objects, and a few example paths.
 */
int si_unmapped_refuse(struct shiftimg *h, const char *target);

/*
 * Refuses a run whose tally counts objects that would grant root after
 * the shift (setuid/setgid root, root capabilities): how many, a few
 * example paths, and --allow-privileged.
 */
int si_privileged_refuse(struct shiftimg *h, const char *target);
/* True if the run must look for such objects before changing anything. */
bool si_check_privileged(const struct shiftimg *h);

/*
 * The stamps a run goes between, as map texts: from is what the target
 * may be stamped with for the run to go ahead ("" when nothing shifted
 * it), to what it is stamped with after ("" when the run leaves it
 * unshifted).  Both are malloc'ed; returns 0 or -ENOMEM.
 */
int si_stamp_texts(const struct shiftimg *h, char **from, char **to);
/*
 * Judges the stamp a target carries (old, "" if none) against a run
 * from `from` to `to` (si_stamp_texts(), or digests of them): 0 to go
 * ahead, SI_STAMP_DONE when the target is already shifted to `to` (the
 * notice says so), or si_error()'s value.  SHIFTIMG_FORCE and a run
 * without SHIFTIMG_STAMP go ahead whatever the stamp.
 */
#define SI_STAMP_DONE	1
int si_stamp_judge(struct shiftimg *h, const char *target, const char *old,
		   const char *from, const char *to);

/* The value of an option, or NULL. */
const char *si_option(const struct shiftimg *h, const char *key);
/* Forgets an option (a whole sets one for each of its parts). */
void si_option_unset(struct shiftimg *h, const char *key);

/* Reports a changed object to the list callback (thread-safe). */
void si_list(struct shiftimg *h, const char *path, const char *what);
/* Reports progress (thread-safe, the caller rate-limits nothing). */
void si_progress(struct shiftimg *h, uint64_t done, uint64_t total);

/* The number of worker threads to use (the option, or one per core). */
unsigned int si_threads(const struct shiftimg *h);

/*
 * A buffer of *len bytes that is filled whole (a read, a batch): from
 * SI_BIG_MIN bytes on it is taken in 2 MiB pages where the kernel has
 * them, and *len is rounded up to what was taken.  Fresh memory costs a
 * page fault per page at first touch, and on a VM a 4 KiB fault costs
 * more than clearing a whole 2 MiB page (a 1 MiB buffer took 3.7 ms to
 * fill, a 2 MiB page 0.2 ms).  Free it with free(3); NULL if none.
 */
#define SI_BIG_MIN	(128u << 10)
void *si_alloc_big(size_t *len);

/*
 * Shifts one target that is not a whole: opens it, picks its backend
 * and drives it (src/handle.c).  Wholes that hold such targets call it.
 */
int si_run_path(struct shiftimg *h, const char *target);

/* LXC containers (src/lxc.c): a directory holding an LXC config. */
bool si_lxc_probe(const char *path);
int si_lxc_run(struct shiftimg *h, const char *target);
int si_lxc_status(struct shiftimg *h, const char *target, FILE *out);
int si_lxc_rollback(struct shiftimg *h, const char *target);

/*
 * The map kind k's ids on disk go through (k has a map): the map given,
 * composed after the inverse of the map the target has now
 * (--from-map), and with keep_outside the identity on every id the
 * from-map does not hold.  Returns 0 or -errno.
 */
int si_disk_map(struct shiftimg *h, int k, struct si_idmap *out);

/* Small files beside a target (src/files.c); each returns 0 or -errno. */
int si_file_read(struct shiftimg *h, const char *path, size_t max, char **buf,
		 size_t *len);
/* A new file with like's mode and owners, synced; removed on failure. */
int si_file_write(struct shiftimg *h, const char *path, const char *buf,
		  size_t len, const struct stat *like);
int si_dir_sync(struct shiftimg *h, const char *dir);
/*
 * The first half of replacing path by buf: unless path holds buf
 * already (1), writes it as next, links path to old, syncs dir.  The
 * caller renames next over path.
 */
int si_file_stage(struct shiftimg *h, const char *path, const char *next,
		  const char *old, const char *dir, const char *buf, size_t len,
		  const struct stat *like, size_t max);
/* Renames old over path, or only unlinks it if both are one file. */
int si_file_put_back(struct shiftimg *h, const char *old, const char *path);

/* containers/storage stores (src/store.c). */
bool si_store_probe(const char *path);
int si_store_run(struct shiftimg *h, const char *target);
int si_store_status(struct shiftimg *h, const char *target, FILE *out);
int si_store_rollback(struct shiftimg *h, const char *target);

/* OCI image layouts (src/oci.c): the layout, or DIR:REF for one tag. */
bool si_oci_probe(const char *path);
int si_oci_run(struct shiftimg *h, const char *target);
/* The old and new digest of each blob a layout's run replaced. */
struct si_oci_renamed {
	char (*pair)[2][SI_DIGEST_LEN];
	size_t nr;
	bool failed;			/* out of memory: the list is short */
	bool own_layout;		/* the caller made the layout: its index.json is no news */
};
/*
 * The same on a layout unpacked from an archive, called name in
 * messages; renamed (may be NULL) gets what it replaced.
 */
int si_oci_run_as(struct shiftimg *h, const char *dir, const char *name,
		  struct si_oci_renamed *renamed);

/* "sha256:<hex>" of a buffer into out (SI_DIGEST_LEN bytes). */
int si_sha256(struct shiftimg *h, const void *buf, size_t len, char *out);

/* OCI archives (src/ociarchive.c): a layout as a tar, shifted through one. */
bool si_oci_archive_probe(const char *path);
int si_oci_archive_run(struct shiftimg *h, const char *target);
/* fn on every entry of the tar target, in order, until one fails. */
struct archive;
struct archive_entry;
typedef int si_archive_entry_fn(struct shiftimg *h, struct archive *a,
				struct archive_entry *e, void *arg);
int si_archive_each(struct shiftimg *h, const char *target, si_archive_entry_fn *fn,
		    void *arg);
/* The current entry's data into a new file path. */
int si_archive_extract(struct shiftimg *h, struct archive *a, const char *target,
		       const char *path);
/* A temporary directory beside out, for an archive unpacked. */
int si_archive_tmpdir(struct shiftimg *h, const char *out, char *dir, size_t size);
/*
 * out replaced by a tar of the entries fill adds to a (buf: a scratch
 * buffer of SI_ARCHIVE_BUF bytes): a temporary file beside it, synced
 * and renamed over it.
 */
#define SI_ARCHIVE_BUF	(1u << 20)
typedef int si_archive_fill_fn(struct shiftimg *h, struct archive *a, char *buf,
			       void *arg);
int si_archive_replace(struct shiftimg *h, const char *out, si_archive_fill_fn *fill,
		       void *arg);

/*
 * A docker save archive of the classic form (src/dockerarchive.c),
 * written to out; rewrite: even if nothing in it changes.
 */
int si_docker_archive_run(struct shiftimg *h, const char *target, const char *out,
			  bool rewrite);

#endif /* SHIFTIMG_INT_H */
