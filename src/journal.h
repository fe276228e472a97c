/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The journal that makes an in-place shift crash safe, and the stamp
 * that records a finished one.  The format is in shiftimg-journal(5).
 *
 * A directory tree is planned first: the check pass records, for every
 * object that changes, its old and new state; the plan is synced once,
 * and only then does the apply pass change anything.  An interrupted
 * tree run is finished by setting every planned object to its recorded
 * new state (idempotent: the record says the target state exactly).
 *
 * An ext4 image is journaled write by write: every in-place write is
 * recorded with the old bytes of its changed ranges (and a hash of the
 * new ones) and queued.
 * A full batch (4 MiB of writes) is committed; its sync runs in a
 * thread of the journal's while the backend goes on and the next
 * batches fill, and its writes are issued at a later commit, once that
 * sync has ended.  Nothing is issued before its record is synced.
 * An interrupted ext4 run is undone from the journal (the old bytes of
 * every committed batch) and then run again from the start.
 */
#ifndef SHIFTIMG_JOURNAL_H
#define SHIFTIMG_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "backend.h"

struct si_journal;

/* ---- the driver (handle.c) ---- */

/* si_journal_start() found nothing left to do; the notice says why. */
#define SI_JOURNAL_NOTHING	1

/*
 * Before a run: finishes or refuses an existing journal for the
 * target, checks the stamp, and opens a new journal.  *jp is NULL when
 * the run needs none (dry runs, tarballs, copies).  Returns 0,
 * SI_JOURNAL_NOTHING or si_error()'s value.
 */
int si_journal_start(struct shiftimg *h, const struct si_backend *b,
		     const struct si_target *t, struct si_journal **jp);
/* After the check pass: makes the tree's plan durable. */
int si_journal_planned(struct si_journal *j);
/*
 * After the apply pass: on success syncs the target, writes (or, for
 * --reverse, removes) the stamp and removes the journal.  On failure
 * keeps the journal (--rollback undoes the run) unless nothing was
 * changed.  Frees j; returns err or a new error.
 */
int si_journal_end(struct si_journal *j, int err);

/* --status and --rollback. */
int si_journal_status(struct shiftimg *h, const char *target, FILE *out);
int si_journal_rollback(struct shiftimg *h, const char *target);

/* ---- the tree backend ---- */

/* One changed xattr of a tree object: its value before and after. */
struct si_journal_xa {
	const char *name;
	const void *old, *new;
	size_t oldlen, newlen;
};

/*
 * A worker's planned records, appended to the journal a block at a
 * time, so that the records of one directory stay together for the
 * apply pass.  Zero it to start; flush it before the plan is synced.
 */
struct si_journal_batch {
	unsigned char *buf;
	size_t len, cap;
};

/*
 * Check pass: records one object's planned change in the worker's
 * batch.  rel is its path below the root ("." for the root); uid and
 * gid are what it becomes.
 */
int si_journal_tree(struct si_journal *j, struct si_journal_batch *b,
		    const char *rel, const struct statx *sx, uint32_t uid,
		    uint32_t gid, unsigned int nr_xa,
		    const struct si_journal_xa *xa);
/* Appends what the batch holds to the journal (thread-safe); frees it. */
int si_journal_batch_flush(struct si_journal *j, struct si_journal_batch *b);

/*
 * Apply pass of a journaled tree run: sets every planned object to its
 * new state, with the code that finishes an interrupted run, on
 * `threads` workers.  Objects removed since the check pass are counted
 * in *gone; failures go to h->tally.st.errors and the handle's error.
 */
int si_journal_tree_apply(struct si_journal *j, unsigned int threads,
			  uint64_t *gone);

/* ---- the ext4 backend ---- */

/* Issues count blocks at blk in place (the backend's own write). */
typedef int si_journal_write_fn(void *arg, uint64_t blk, unsigned int count,
				const void *buf);
/* Reads what count blocks at blk hold now (the I/O layer's read). */
typedef int si_journal_read_fn(void *arg, uint64_t blk, unsigned int count,
			       void *buf);

/* Tells the journal the block size and how to write in place. */
void si_journal_blocks(struct si_journal *j, unsigned int bsz,
		       si_journal_write_fn *fn, void *arg);
/*
 * An in-place write: old holds the blocks as they are now, new as they
 * become.  It is recorded, then written through fn once its record is
 * synced.  Through the journal's I/O layer (below) it is a plain write,
 * and old is not used: that layer reads the old bytes itself.
 */
int si_journal_block(struct si_journal *j, uint64_t blk, unsigned int count,
		     const void *old, const void *new);
/* Commits and writes what is queued (before the image is closed). */
int si_journal_flush(struct si_journal *j);
/* Copies the newest queued version of block blk into buf, if any. */
bool si_journal_peek(struct si_journal *j, uint64_t blk, void *buf);

/*
 * The io_manager the ext4 backend opens images with (journal-io.c):
 * during a journaled run, one that sends every write of libext2fs
 * through the journal (quota files and bitmaps included); under
 * SHIFTIMG_FAULT=...:power, one that loses every write since the last
 * flush when the fault fires; else unix_io.  Call it for each open.
 *
 * Once an image is open through it, si_journal_block() is a plain
 * write through the function given to si_journal_blocks(): the I/O
 * layer below journals it, and everything else libext2fs writes.
 */
struct struct_io_manager;
struct struct_io_manager *si_journal_io_manager(void);
/* The journal of the run in progress on this thread, or NULL. */
struct si_journal *si_journal_active(void);
/*
 * For journal-io.c: its own writer and reader (arg is passed to both),
 * and the journaling of one write, whose old bytes the journal reads
 * through the reader, a chunk at a time.
 */
void si_journal_io_attach(struct si_journal *j, unsigned int bsz,
			  si_journal_write_fn *write, si_journal_read_fn *read,
			  void *arg);
int si_journal_io_block(struct si_journal *j, uint64_t blk, unsigned int count,
			const void *new);
/* The I/O layer synced the image: every write issued so far is on disk. */
void si_journal_io_synced(struct si_journal *j);

/* ---- fault injection (SHIFTIMG_FAULT=write:N, sync:N, any:N) ---- */

enum si_fault_kind { SI_FAULT_WRITE, SI_FAULT_SYNC };
/* A write or sync point: dies here if it is the Nth.  Thread-safe. */
void si_fault(enum si_fault_kind kind);
/* True under SHIFTIMG_FAULT=...:power (unsynced writes are lost). */
bool si_fault_power(void);
/* Called just before dying: throws away what a power cut would lose. */
void si_fault_on_crash(void (*fn)(void *), void *arg);

/* ---- the stamp (stamp.c) ---- */

/*
 * The largest stamp: a tree's is the map text, up to 340 ranges of each
 * kind on each side of a re-shift.
 */
#define SI_STAMP_MAX	(64u << 10)
/* Reads the stamp into buf ("" if none); returns 0 or -errno. */
int si_stamp_get(const struct si_backend *b, const struct si_target *t,
		 uint64_t offset, char *buf, size_t size);
/*
 * Writes value as the stamp, or removes it when value is "", without
 * syncing: the caller syncs the target after it.  Returns 1 if it
 * changed the target, 0 if the stamp was already so, or -errno.
 */
int si_stamp_set(const struct si_backend *b, const struct si_target *t,
		 uint64_t offset, const char *value);

#endif /* SHIFTIMG_JOURNAL_H */
