// SPDX-License-Identifier: LGPL-2.1-or-later
/* The tar backend: not written yet. */
#include <errno.h>

#include "backend.h"

static bool tar_probe(const struct si_target *t)
{
	return false;
}

static int tar_shift(struct shiftimg *h, const struct si_target *t,
		      enum si_pass pass)
{
	return si_error(h, ENOTSUP, "%s: the tar backend is not built yet", t->path);
}

const struct si_backend si_tar_backend = {
	.name = "tar",
	.probe = tar_probe,
	.shift = tar_shift,
};
