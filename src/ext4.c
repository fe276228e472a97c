// SPDX-License-Identifier: LGPL-2.1-or-later
/* The ext4 backend: not written yet. */
#include <errno.h>

#include "backend.h"

static bool ext4_probe(const struct si_target *t)
{
	return false;
}

static int ext4_shift(struct shiftimg *h, const struct si_target *t,
		      enum si_pass pass)
{
	return si_error(h, ENOTSUP, "%s: the ext4 backend is not built yet", t->path);
}

const struct si_backend si_ext4_backend = {
	.name = "ext4",
	.probe = ext4_probe,
	.shift = ext4_shift,
};
