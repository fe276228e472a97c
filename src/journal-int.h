/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The journal's own pieces, shared by the files that make it up and by
 * no one else: the constants of the format (shiftimg-journal(5)), the
 * run's state, a journal read back, and what each file lends the
 * others.  journal.c drives a run (starting, resuming, ending, --status,
 * --rollback); journal-file.c writes, syncs and reads the file's header
 * and records; journal-tree.c plans and replays a tree; journal-ext4.c
 * journals and undoes an image's writes.
 */
#ifndef SHIFTIMG_JOURNAL_INT_H
#define SHIFTIMG_JOURNAL_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "journal.h"

#define J_MAGIC		"SHIFTIMG-JOURNAL"
#define J_VERSION	4		/* v4: a tree's filesystem id */
#define J_VERSION_MIN	2		/* v2: block records hold the new bytes too */
#define J_HDR_FIXED	88
#define R_MAGIC		0x3143524aU	/* "JRC1" little endian */
#define R_HEAD		24
#define R_TAIL		8
#define BUF_FLUSH	(1u << 20)	/* tree: journal bytes kept before a write(2) */
#define BUF_EXT4	(4u << 20)	/* ext4: the buffer's first size */
#define BUF_MAX		(64u << 20)	/* ext4: journal bytes kept before a write(2) */
#define BATCH_BYTES	(4u << 20)	/* ext4: queued in-place bytes per commit */
#define BATCH_RECS	4096		/* ext4: queued writes per commit */
#define RING		4		/* ext4: batches in flight, and the open one */
#define CHUNK		(256u << 10)	/* ext4: old bytes read at a time */
#define RANGE_GAP	2		/* unchanged bytes merged into a range */
#define BLOCK_HEAD	24		/* a block record's payload before its ranges */
#define PINNED		(FS_IMMUTABLE_FL | FS_APPEND_FL)

enum { J_TREE = 1, J_EXT4 = 2 };
enum { REC_TREE = 1, REC_BLOCK = 2, REC_COMMIT = 3 };
#define HDR_REVERSE	(1u << 0)

/* One in-place write waiting for its batch to be committed and synced. */
struct pending {
	uint64_t blk;
	unsigned int count;
	size_t at;			/* its new bytes, in the arena */
};

/* ext4: a batch of writes, whose records go out with one commit. */
struct batch {
	off_t jend;			/* the journal's end at its commit */
	struct pending *q;
	size_t nr, cap;
	/*
	 * Its writes as they will be issued, back to back: each write's
	 * old bytes read in and its changed ranges put over them.  Kept
	 * from one batch to the next, since fresh memory costs a page
	 * fault a page.
	 */
	unsigned char *arena;
	size_t bytes, arena_cap;
};

/*
 * The thread that syncs the journal for an ext4 run, so that a batch's
 * fdatasync(2) runs while the backend reads and shifts its next run.
 */
struct syncer {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool running, stop;
	off_t want, done;		/* journal bytes asked to be and synced */
	int err;			/* errno of a failed sync */
};

struct si_journal {
	struct shiftimg *h;
	int kind;			/* J_TREE or J_EXT4 */
	const struct si_target *t;
	char *path;
	int fd;
	uint64_t run_id, seq, nrec;
	uint64_t offset;		/* ext4: the filesystem's byte offset */
	off_t rec_start;		/* where the records begin in the file */

	pthread_mutex_t lock;
	unsigned char *buf;		/* encoded, not yet written */
	size_t len, cap;
	off_t written, synced;
	off_t kicked;			/* tree: writeback started up to here */
	bool dir_synced;
	bool ordered;			/* tree: ordered_by_fs(), once a run */
	bool changed;			/* the target may differ from before */
	bool target_dirty;		/* ext4: written since the I/O layer synced */
	bool failed;			/* a journal write failed: stop */

	unsigned int bsz;
	si_journal_write_fn *write_fn;	/* issues a committed write */
	void *write_arg;
	bool io_level;			/* the I/O layer journals (journal-io.c) */
	si_journal_write_fn *backend_fn; /* the backend's own write, then */
	void *backend_arg;
	si_journal_read_fn *read_fn;	/* reads what blocks hold now */
	/*
	 * A ring of batches of writes: nfl of them in flight from bt[head]
	 * on, oldest first, each committed with its sync under way (or
	 * done) and its writes not issued yet; then the open one, whose
	 * records are being made.
	 */
	struct batch bt[RING];
	unsigned int head, nfl;
	/*
	 * Arenas of landed batches, for the next batch that opens: only as
	 * many are made as batches are ever open or in flight at once.
	 */
	struct spare {
		unsigned char *arena;
		size_t cap;
	} spare[RING];
	unsigned int nspare;
	struct syncer sync;

	unsigned char *gather;		/* ext4: a record's new bytes, for its hash */
	size_t gather_cap;
	char *stamp_old;		/* the stamp before the run */
	char *stamp_new;		/* after it; "" when the run removes it */
};

/* ---- journal-file.c: the file ---- */

struct hdr {
	int kind;
	uint32_t version;
	uint64_t run_id, dev, ino, size, offset, flags, created;
	char *map, *stamp;
	size_t len;			/* bytes, checksum included */
};

struct loaded {
	struct hdr hdr;
	unsigned char *data;
	size_t size;
	/* Offsets of the committed records (commits themselves left out). */
	size_t *recs;
	size_t nr_recs;
	bool planned;			/* tree: the plan is complete */
	bool torn;			/* a tail past the last commit was ignored */
	/* tree: the root's device in the records and now, when they differ */
	uint64_t dev_was, dev_now;
};

/* Starts a record of payload size len; returns where the payload goes. */
unsigned char *si_journal_rec_begin(struct si_journal *j, int type, size_t len);
/* Ends the record begun at j->len; one never ended is not written. */
void si_journal_rec_end(struct si_journal *j, size_t len);
/* At least more bytes free in j->buf; 0 or -ENOMEM. */
int si_journal_reserve(struct si_journal *j, size_t more);
/* Writes out what j->buf holds. */
int si_journal_write_out(struct si_journal *j);
/* Syncs the directory of path (with whole_fs, its whole filesystem). */
int si_journal_sync_dir(struct shiftimg *h, const char *path, bool whole_fs);
/* Ends a batch: a commit record after its records, all written out. */
int si_journal_put_commit(struct si_journal *j, bool plan);
/* Commits what is written and makes it durable. */
int si_journal_commit(struct si_journal *j, bool plan);
/* The journal's sync thread: start a sync, wait for one, stop it. */
int si_journal_sync_start(struct si_journal *j);
int si_journal_sync_wait(struct si_journal *j, off_t to, bool wait);
void si_journal_sync_stop(struct si_journal *j);
/* The canonical text of the run's maps ("FROM -> MAP" for a re-shift). */
char *si_journal_map_text(const struct shiftimg *h);
/* The id of a tree's filesystem, or 0. */
uint64_t si_journal_fs_id(int fd);
/* The target's device and inode, as the header holds them. */
void si_journal_identity(const struct si_target *t, uint64_t *dev, uint64_t *ino);
/* Puts the header in j->buf: the first bytes the journal is written with. */
int si_journal_write_header(struct si_journal *j, const char *map);
/* Reads a journal back: its header and committed records. */
int si_journal_load(struct shiftimg *h, const char *path, int fd, struct loaded *l);
void si_journal_loaded_free(struct loaded *l);

/* ---- journal-tree.c: a tree's plan ---- */

/* Redo (side 1) or undo (side 0) every planned tree object; no sync. */
int si_journal_tree_replay(struct shiftimg *h, const struct si_target *t,
			   const struct loaded *l, int side, uint64_t *done,
			   uint64_t *replaced);
/* Adds to the notice how many planned objects were found replaced. */
void si_journal_note_replaced(struct shiftimg *h, uint64_t replaced);
/* A device number as a tree record holds it. */
uint64_t si_journal_rec_dev(dev_t dev);
/* --status: how far the tree got (n[4]: old, new, other, gone). */
void si_journal_tree_census(struct shiftimg *h, const struct si_target *t,
			    const struct loaded *l, uint64_t n[4]);

/* ---- journal-ext4.c: an image's writes ---- */

/* Undoes every committed block record, newest first; no sync. */
int si_journal_ext4_undo(struct shiftimg *h, const struct si_target *t,
			 const struct loaded *l);
/* --status: which side each block record is on (n[4]: old, new, neither, unreadable). */
void si_journal_ext4_census(const struct si_target *t, const struct loaded *l,
			    uint64_t n[4]);

/* ---- journal.c ---- */

/* Fault injection or counting is on: points are made finer. */
bool si_fault_active(void);

#endif /* SHIFTIMG_JOURNAL_INT_H */
