/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The backend interface: each backend is one file exporting one const
 * table.  shiftimg_run() opens the target, asks each backend's probe in
 * turn, and drives the chosen one through its passes.
 */
#ifndef SHIFTIMG_BACKEND_H
#define SHIFTIMG_BACKEND_H

#include <stdbool.h>
#include <sys/stat.h>

#include "shiftimg-int.h"

struct si_target {
	const char *path;	/* as named by the user; "-" for stdin */
	int fd;			/* O_RDONLY|O_NOFOLLOW (O_PATH for others), -1 for "-" */
	struct stat st;
};

enum si_pass {
	SI_PASS_CHECK,		/* read only: count into h->tally what APPLY would do */
	SI_PASS_APPLY,		/* change the target */
};

/*
 * apply leaves the target untouched when it fails (it writes a copy and
 * renames it into place), so it may decide --unmapped=fail itself and
 * the check pass is not run first.
 */
#define SI_BACKEND_ATOMIC	(1u << 0)

struct si_backend {
	const char *name;
	unsigned int flags;
	/* Option keys this backend accepts (NULL-terminated). */
	const char *const *options;
	/* Cheap: is the target ours?  Must not change anything. */
	bool (*probe)(const struct si_target *t);
	/* Counts into h->tally; returns 0 or si_error()'s value. */
	int (*shift)(struct shiftimg *h, const struct si_target *t,
		     enum si_pass pass);
};

extern const struct si_backend si_tree_backend;
extern const struct si_backend si_ext4_backend;
extern const struct si_backend si_tar_backend;

#endif /* SHIFTIMG_BACKEND_H */
