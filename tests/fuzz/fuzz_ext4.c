// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The ext4 backend on hostile images held in memory (a memfd): the
 * whole run as the command line does it, a check pass where the driver
 * wants one and then the writes.  The first byte picks the direction
 * and the unmapped-id policy; the rest is the image.  libext2fs itself
 * is not instrumented: what is checked is our code on what it returns.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shiftimg.h"

static void list(void *arg, const char *path, const char *what)
{
	if (!path || !what)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct shiftimg *h;
	char path[64];
	uint64_t flags = 0;
	int fd;

	/* Only images: other inputs would be taken for tarballs. */
	if (size < 2048 + 1 || data[1 + 1024 + 56] != 0x53 ||
	    data[1 + 1024 + 57] != 0xef)
		return 0;
	fd = memfd_create("fuzz-ext4", MFD_CLOEXEC);
	if (fd < 0 || write(fd, data + 1, size - 1) != (ssize_t)(size - 1))
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

	h = shiftimg_new();
	if (!h || shiftimg_map_parse(h, SHIFTIMG_BOTH, "0:100000:65536") ||
	    shiftimg_map_parse(h, SHIFTIMG_BOTH, "3000000:100:1000"))
		abort();
	if (data[0] & 1)
		flags |= SHIFTIMG_REVERSE;
	if (data[0] & 2)
		flags |= SHIFTIMG_DRY_RUN;
	if (data[0] & 4)
		flags |= SHIFTIMG_ALLOW_PRIVILEGED;
	if (data[0] & 8)
		shiftimg_set_list(h, list, NULL);
	shiftimg_set_flags(h, flags);
	shiftimg_set_unmapped(h, (enum shiftimg_unmapped)((data[0] >> 4) % 3));
	shiftimg_set_threads(h, 1);
	if (shiftimg_run(h, path) < 0 && !shiftimg_error(h)[0])
		abort();	/* every refusal says why */
	shiftimg_free(h);
	close(fd);
	return 0;
}
