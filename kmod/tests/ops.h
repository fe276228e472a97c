/* SPDX-License-Identifier: GPL-2.0-only */
/* The starting tree and the operations compared across mounts. */
#ifndef VMTEST_OPS_H
#define VMTEST_OPS_H

#include "vmtest.h"

/* Operations only ext4 supports in 6.1 (user xattrs, inode flags). */
#define OPS_EXT4	(1u << 0)
/* The reference run on an idmapped mount: its known kernel bugs are noted. */
#define OPS_REFERENCE	(1u << 1)

/* Builds the tree at root as real root; exe is copied in as bin/true. */
void ops_populate(const char *root, const char *exe);
/*
 * Runs every operation in the current directory, logging results to log
 * and, for the ext4-only ones, to log_ext4.
 */
void ops_run(struct vt_buf *log, struct vt_buf *log_ext4, const char *tgt,
	     unsigned int flags);

#endif /* VMTEST_OPS_H */
